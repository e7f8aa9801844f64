"""Transactions (KIP-98): the transaction coordinator (coordinator), its state in ``__transaction_state``
(state_store, log_format), the state machine of one transactional id (metadata) and the transaction markers
(markers)."""
