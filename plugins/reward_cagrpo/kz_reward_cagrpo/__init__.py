"""kz-reward-cagrpo: CA-GRPO reward shaping for the Coder (speed counts once correctness does).

``settings.py`` reads and validates the ``reward`` config section, ``shaping.py`` holds the
pure reward arithmetic (variants ``group``, ``decoupled``, ``global``), and ``plugin.py``
answers kz's ``shape_rewards`` hook. kz loads the plugin through the entry point
``reward_cagrpo`` in the group ``kz``; nothing here is imported by the core.
"""

__version__ = "0.1.0"
