"""fedprivacy inside anyone's Flower app.

The ClientApp mod (``mod``), the ``PrivateFedAvg`` server workflow with its configuration
and result (``private_fedavg``, ``private_config``, ``private_result``), the app's arrays as one
vector (``arrays``) and the same run in this process (``in_process``, ``app_transport``).
"""
