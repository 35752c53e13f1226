"""Deployments on one machine and the Flower App they run.

The App (``apps``), ``fedprivacy flower deploy`` (``deploy``, ``deploy_setup``,
``deploy_tasks``), the SuperLink and SuperNodes on loopback (``local_deployment``,
``supernode_launch``, ``warm_clientapp``, ``watchdog``, ``stragglers``), their TLS and runtime
secrets (``tls``, ``runtime_auth``) and a deployed run's directory (``run``).
"""
