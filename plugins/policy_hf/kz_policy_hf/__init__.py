"""kz-policy-hf: language-model policies from Hugging Face transformers.

The plugin answers the ``sample_completions`` hook when ``policy.sampler`` is ``hf``
(``kz_policy_hf.plugin``), with an embedded default model, SmolLM2-135M-Instruct, that
works offline (``kz_policy_hf.embedded``). Importing this package must stay cheap: it
must not import torch or transformers; the modules that need them import them.
"""

from kz_policy_hf.errors import PolicyError

__all__ = ["PolicyError", "__version__"]

__version__ = "0.1.0"
