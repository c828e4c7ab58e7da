"""The operator's dashboard under ``/admin`` and the ``haggler`` commands that print the same.

``reports`` (``store_reports``, ``exchange_report``, ``matching_report``, ``market_report``) are
pure reads over a database connection: one home for every number, which the HTML pages
(``pages``, ``routes``) and the command line (``commands``) both show. ``charts`` draws SVG on the
server, ``auth`` keeps every page behind the operator token. Hidden state (floors, margins,
extras' costs) appears here and only here, behind that token.
"""
