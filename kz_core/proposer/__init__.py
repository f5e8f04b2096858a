"""The Proposer's side of kz: the API catalog, module validation, the module pool."""
