"""The one interface every payment handler implements.

Why an interface and not a processor's SDK called from the checkout: a store may take payments through
whichever processor it has, and the checkout code must behave the same for all of them: charge once
per idempotency key, place the order only on success, and tell the buyer why not otherwise.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class PaymentOutcome(enum.Enum):
    """How a charge ended, as far as the processor has told us."""

    SUCCEEDED = "succeeded"
    DECLINED = "declined"  # the processor refused: a final answer for this credential
    ACTION_REQUIRED = "action_required"  # the buyer must act first (3-D Secure): nothing taken yet


@dataclass(frozen=True, slots=True)
class Charge:
    """What to take: an amount in minor units, the credential as the protocol carried it, and the
    key that makes a retry the same charge (a second call with the same key never charges twice)."""

    amount_cents: int
    currency: str
    credential: Mapping[str, Any]
    idempotency_key: str
    description: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChargeResult:
    """The processor's answer: its reference for the payment, and for the buyer why it did not
    succeed (``reason``) or where to go to complete it (``action_url``)."""

    outcome: PaymentOutcome
    reference: str | None = None
    reason: str | None = None
    action_url: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome is PaymentOutcome.SUCCEEDED


class PaymentUnavailable(Exception):
    """The processor could not be reached or did not answer in time: whether money moved is unknown,
    so the checkout places no order and the same charge may be retried with the same idempotency key."""


class PaymentHandler(Protocol):
    """A way to pay, named as the checkout protocols name it (``id``, e.g. ``mock_payment_handler``)."""

    id: str

    def charge(self, charge: Charge) -> ChargeResult:
        """Take the money, or say why not; raises :class:`PaymentUnavailable` when the answer is unknown."""
        ...


class PaymentSetupError(RuntimeError):
    """The handler cannot charge as it is set up or called (its SDK not installed, a key the processor
    refuses, a request the processor rejects as malformed): the operator's problem, not the buyer's,
    and a retry would fail the same way. Nothing was charged."""
