"""Payment handlers: how a checkout takes the money for an order (issue 31).

A checkout protocol (UCP, ACP) reads a payment credential off the wire and hands it, with the amount,
to the handler the buyer chose. Handlers are plug-ins behind :class:`PaymentHandler`: the simulated
one the UCP conformance suite expects (``payments/simulated.py``), and Stripe behind the optional
``haggler[stripe]`` extra (:class:`StripeHandler`, which imports the SDK only when built, so this
package imports without it). The order core places an order only after :attr:`ChargeResult.succeeded`,
so a failed payment leaves no order and no redeemed deal.
"""

from haggler.payments.handler import (
    Charge,
    ChargeResult,
    PaymentHandler,
    PaymentOutcome,
    PaymentSetupError,
    PaymentUnavailable,
)
from haggler.payments.stripe_handler import StripeHandler

__all__ = ["Charge", "ChargeResult", "PaymentHandler", "PaymentOutcome", "PaymentSetupError", "PaymentUnavailable",
           "StripeHandler"]
