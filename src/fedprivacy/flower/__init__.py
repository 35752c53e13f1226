"""Running fedprivacy on Flower (issue #18, in progress): what a deployment needs.

Today: :mod:`fedprivacy.flower.tls`, the certificate authority and server certificate of a
local SuperLink / SuperNode deployment over TLS, made with ``cryptography``. Importing this
package does not import Flower.
"""
