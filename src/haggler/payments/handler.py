"""The one interface every payment handler implements.

Why an interface and not a processor's SDK called from the checkout: a store may take payments through
whichever processor it has, and the checkout code must behave the same for all of them: charge once
per idempotency key, place the order only on success, and tell the buyer why not otherwise.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


class PaymentOutcome(enum.Enum):
    """How a charge ended, as far as the processor has told us."""

    SUCCEEDED = "succeeded"
    DECLINED = "declined"  # the processor refused: a final answer for this credential
    ACTION_REQUIRED = "action_required"  # the buyer must act first (3-D Secure): nothing taken yet


#: The 3-D Secure directory servers (card networks) a buyer's side can authenticate with, in ACP's words.
DIRECTORY_SERVERS = ("american_express", "mastercard", "visa")
#: The authentication outcomes after which the payment goes on to the issuer with the cryptogram
#: (EMV 3-D Secure's transStatus Y, A and I); every other outcome is a failure: nothing may be taken.
AUTHENTICATED_OUTCOMES = ("authenticated", "attempt_acknowledged", "informational")


@dataclass(frozen=True, slots=True)
class Acquirer:
    """The acquirer's side of a 3-D Secure authentication (EMV 3DS's acquirerBIN, acquirerMerchantID,
    merchantName, threeDSRequestorID, and the acquirer's country). A processor's API does not say
    these: they come from the store's acquiring contract, set by its operator, so a handler knows them
    only when it was given them."""

    bin: str
    country: str
    merchant_id: str
    merchant_name: str
    requestor_id: str | None = None


@dataclass(frozen=True, slots=True)
class AuthenticationRequest:
    """What a buyer's side needs to run 3-D Secure itself, for a charge the issuer wants
    authenticated: the acquirer, and the directory server of the card's network. A handler gives it
    only when it knows both: a protocol whose agent runs 3-D Secure (ACP) cannot be sent otherwise."""

    acquirer: Acquirer
    directory_server: str


@dataclass(frozen=True, slots=True)
class AuthenticationResult:
    """3-D Secure as the buyer's side ran it, handed back to continue the same payment: ``outcome``
    (ACP's words; :data:`AUTHENTICATED_OUTCOMES` go on) and, for those, what the issuer's access
    control server returned: the cryptogram (CAVV/AAV), the ECI, the directory server's transaction
    id and the protocol version, which the processor passes to the issuer with the authorization."""

    outcome: str
    cryptogram: str | None = None
    electronic_commerce_indicator: str | None = None
    transaction_id: str | None = None
    version: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.outcome in AUTHENTICATED_OUTCOMES

    @property
    def digest(self) -> str:
        """A short fingerprint of the result, for a processor request that applies it: the same
        result sent again is the same request (idempotent), another result another request."""
        return hashlib.sha256(json.dumps([self.outcome, self.cryptogram, self.electronic_commerce_indicator,
                                          self.transaction_id, self.version]).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Charge:
    """What to take: an amount in minor units, the credential as the protocol carried it, and the
    key that makes a retry the same charge (a second call with the same key never charges twice).

    ``authentication``: the buyer's 3-D Secure result, when this charge continues the one with the
    same key that answered :attr:`PaymentOutcome.ACTION_REQUIRED` with an
    :class:`AuthenticationRequest`. It is the same payment, so the key does not change; a handler
    given a result that is not :attr:`AuthenticationResult.authenticated` declines and makes sure
    the processor takes nothing.

    ``return_url``: where the processor sends the buyer back after acting at its page (3-D Secure),
    when the checkout has a page of its own for it (UCP's ``continue_url``); None: the handler's
    own setting. A retry of the charge must carry the same one, or the processor sees another
    request under the same key."""

    amount_cents: int
    currency: str
    credential: Mapping[str, Any]
    idempotency_key: str
    description: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    authentication: AuthenticationResult | None = None
    return_url: str | None = None


@dataclass(frozen=True, slots=True)
class ChargeResult:
    """The processor's answer: its reference for the payment, and for the buyer why it did not
    succeed (``reason``) or, when they must authenticate first, where to go to do it on the
    processor's page (``action_url``) and what a buyer's side needs to do it itself
    (``authentication``); a handler gives each it can, and the protocol picks the one it speaks."""

    outcome: PaymentOutcome
    reference: str | None = None
    reason: str | None = None
    action_url: str | None = None
    authentication: AuthenticationRequest | None = None

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

    def retrieve(self, reference: str) -> ChargeResult:
        """The payment ``reference`` names (a :attr:`ChargeResult.reference` this handler gave) as it
        stands now at the processor, read without charging: how a checkout learns that a buyer it
        sent to authenticate has done so. Raises :class:`PaymentUnavailable` when the processor does
        not answer, :class:`PaymentSetupError` when it cannot be asked."""
        ...


class PaymentSetupError(RuntimeError):
    """The handler cannot charge as it is set up or called (its SDK not installed, a key the processor
    refuses, a request the processor rejects as malformed): the operator's problem, not the buyer's,
    and a retry would fail the same way. Nothing was charged."""
