"""The method's rewards, for every trainer plugin: :class:`CoderReward` (evaluator results
shaped by the ``shape_rewards`` hook, CA-GRPO by default) and :class:`ProposerReward`
(module validation and learnability under the current Coder). Both are picklable async
callables with TRL's reward-function signature; they start their evaluators and workers on
first use, in whichever process calls them.
"""

from kz_core.rewards.coder import CoderReward, RewardUnavailableError, completion_text
from kz_core.rewards.proposer import API_SEPARATOR, ProposerReward

__all__ = ["API_SEPARATOR", "CoderReward", "ProposerReward", "RewardUnavailableError", "completion_text"]
