"""haggler on Matrix (issue 32): the market reachable from a Matrix homeserver's rooms.

``homeserver``: a throwaway local Synapse that tests, and ``haggler market scenario`` without a
``--homeserver``, start and stop themselves; and shared-secret registration against any Synapse.
Synapse (AGPL-3.0) is only ever run as a separate process, never imported: it is the optional
``haggler[matrix-homeserver]`` extra. The client side is matrix-nio (ISC), the ``haggler[matrix]``
extra.
"""
