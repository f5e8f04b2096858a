"""One round of proposing: API sets in, validated modules in the pool out.

``propose_round`` samples API sets weighted by the Coder's frontier (``sample_api_sets``
with the pool's statistics), asks the Proposer policy for one module per set
(``sample_completions`` hook, role ``proposer``, the prompts of ``kz_core.prompts``),
parses the replies, validates the modules in sandboxed workers and adds every one of
them, valid or not, to the pool. ``summarize_round`` counts what came out. ``kz propose``
and the co-evolution loop call it; it prints nothing.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs

from kz_core.generate import PolicyUnavailableError
from kz_core.parsing import ParsedReply, extract_code
from kz_core.prompts import proposer_prompt
from kz_core.proposer.validate import ModuleValidation, ModuleValidator


@attrs.frozen
class RoundSummary:
    """What one round of proposing produced.

    :ivar round: the round's number in the pool.
    :ivar proposed: modules asked for.
    :ivar valid: modules that passed validation.
    :ivar invalid_by_reason: invalid modules by their first failed check.
    :ivar apis_requested: distinct APIs asked for.
    :ivar apis_covered: distinct APIs the valid modules were asked for.
    :ivar catalog_size: APIs in the catalog.
    :ivar pool_size: modules in the pool afterwards.
    :ivar pool_valid: valid modules in the pool afterwards.
    :ivar names: the names the modules were stored under, in order.
    """

    round: int
    proposed: int
    valid: int
    invalid_by_reason: dict[str, int] = attrs.field(factory=dict)
    apis_requested: int = 0
    apis_covered: int = 0
    catalog_size: int = 0
    pool_size: int = 0
    pool_valid: int = 0
    names: tuple[str, ...] = ()

    @property
    def valid_share(self) -> float:
        return self.valid / self.proposed if self.proposed else 0.0


def proposer_checkpoint(policy_config: Any) -> str:
    """The Proposer's model as the pool records it (provenance)."""
    return policy_config.proposer_model or policy_config.model or "embedded:smollm2"


def sample_modules(api_sets: Sequence[Sequence[str]], policy_config: Any, pm: Any) -> list[ParsedReply]:
    """One parsed reply per API set from the Proposer policy.

    :raises PolicyUnavailableError: no installed plugin samples with ``policy.sampler``.
    """
    prompts = [proposer_prompt(list(apis), policy_config) for apis in api_sets]
    completions = pm.hook.sample_completions(prompts=prompts, n=1, role="proposer", config=policy_config)
    if completions is None:
        raise PolicyUnavailableError(
            f"no installed plugin samples with policy.sampler={policy_config.sampler!r}: install kz-policy-hf (sampler 'hf') or set policy.sampler"
        )
    replies = [group[0].text if group else "" for group in completions]
    return [extract_code(text) for text in replies]


def propose_round(
    count: int,
    config: Any,
    pool: Any,
    pm: Any,
    *,
    device: str | None = None,
    validator: ModuleValidator | None = None,
    round_number: int | None = None,
) -> tuple[list[ModuleValidation], RoundSummary]:
    """Propose ``count`` modules, validate them and add them all to ``pool``.

    :param config: the resolved kz config (``proposer``, ``frontier``, ``policy``, ``eval``).
    :param pool: the :class:`~kz_core.proposer.pool.ModulePool` to add to.
    :param pm: the plugin manager.
    :param device: where modules are validated (None: ``eval.device``).
    :param validator: a running validator to reuse (None: one for this call).
    :param round_number: the round the modules are stored under (None: the pool's next).
    :returns: the validations, in API-set order, and the round's summary.
    """
    from kz_core.frontier import sample_api_sets
    from kz_core.proposer.catalog import api_catalog

    catalog = api_catalog()
    if round_number is None:
        round_number = pool.next_round()
    rng = random.Random(f"{config.run.seed}:{round_number}")
    proposer = config.proposer
    api_sets = sample_api_sets(catalog, pool.stats(), count, proposer.min_apis, proposer.max_apis, config.frontier, rng)
    sampled = sample_modules(api_sets, config.policy, pm)
    modules = [(f"r{round_number:03d}_{i:03d}", parsed, apis) for i, (parsed, apis) in enumerate(zip(sampled, api_sets))]
    if validator is None:
        with ModuleValidator(config, device) as own:
            validations = own.validate(modules, pool)
    else:
        validations = validator.validate(modules, pool)
    checkpoint = proposer_checkpoint(config.policy)
    names = tuple(pool.add(v, round=round_number, checkpoint=checkpoint) for v in validations)
    return validations, summarize_round(round_number, validations, api_sets, len(catalog), pool, names)


def summarize_round(
    round_number: int, validations: Sequence[ModuleValidation], api_sets: Sequence[Sequence[str]], catalog_size: int, pool: Any, names: Sequence[str] = ()
) -> RoundSummary:
    """Counts over one round's validations (and the pool's size afterwards)."""
    valid = [v for v in validations if v.valid]
    return RoundSummary(
        round=round_number,
        proposed=len(validations),
        valid=len(valid),
        invalid_by_reason=dict(Counter(v.reason for v in validations if not v.valid).most_common()),
        apis_requested=len({api for apis in api_sets for api in apis}),
        apis_covered=len({api for v in valid for api in v.apis}),
        catalog_size=catalog_size,
        pool_size=len(pool),
        pool_valid=len(pool.entries(valid=True)),
        names=tuple(names),
    )
