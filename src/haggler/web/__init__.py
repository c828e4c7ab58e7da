"""The store's human side: pages for people, not agents.

``layout`` is the one page frame (style, header) every human page uses; the storefront and its
haggling widget, the checkout of a deal or a cart, and the operator's dashboard build on it.
``api_docs`` serves ``/docs``, the API's reference, from a Swagger UI vendored in ``swagger_ui/``.
Every page outside ``/admin`` is built from public facts only.
"""
