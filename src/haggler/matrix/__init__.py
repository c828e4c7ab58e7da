"""haggler on Matrix (issue 32): the market reachable from a Matrix homeserver's rooms.

``homeserver``: a throwaway local Synapse that tests, and ``haggler market scenario`` without a
``--homeserver``, start and stop themselves; and shared-secret registration against any Synapse.
Synapse (AGPL-3.0) is only ever run as a separate process, never imported: it is the optional
``haggler[matrix-homeserver]`` extra. The client side is matrix-nio (ISC), the ``haggler[matrix]``
extra.

``connection``: the market bot's client over matrix-nio: login from the environment, the market room
found or created by its alias, and sync, send (deduplicated by transaction id), private rooms and
redaction that wait out restarts, timeouts, 5xx and rate limits and fail fast on real refusals.
"""
