"""What a user's node runs and keeps.

Its request handler (``node``), its policy (``node_policy``), its keys across rounds
(``node_keys``), its state that outlives a run (``party_state``), and what its operator writes:
its policy file, key and the federation's roster (``operator``), its SuperNode key pair
(``node_auth``).
"""
