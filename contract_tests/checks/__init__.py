"""The contract checks, one module per group; contract_tests.registry imports them in run order."""
