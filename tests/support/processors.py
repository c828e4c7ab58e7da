"""A payment handler that answers from a script, for checkout tests that need an outcome the
simulated handler never gives (no answer, 3-D Secure): like a real processor, it remembers its answer
per idempotency key and gives it again, until the test says the buyer acted, and reads a payment
back by its reference (``retrieve``: no answer while ``unreachable``). ``Held`` also keeps each
answer back until the test lets it go (a completion still charging)."""

from __future__ import annotations

import threading

from haggler.payments.handler import Charge, ChargeResult, PaymentUnavailable

HANDLER_ID = "mock_payment_handler"


class Scripted:
    id = HANDLER_ID

    def __init__(self, *answers: ChargeResult | BaseException) -> None:
        self.answers = list(answers)
        self.charges: list[Charge] = []
        self.done: dict[str, ChargeResult] = {}
        self.reads: list[str] = []
        self.unreachable = False

    def charge(self, charge: Charge) -> ChargeResult:
        self.charges.append(charge)
        if charge.idempotency_key in self.done:
            return self.done[charge.idempotency_key]
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        self.done[charge.idempotency_key] = answer
        return answer

    def retrieve(self, reference: str) -> ChargeResult:
        self.reads.append(reference)
        if self.unreachable:
            raise PaymentUnavailable("the processor did not answer")
        return next(answer for answer in self.done.values() if answer.reference == reference)

    def settle_all(self, result: ChargeResult) -> None:
        """What the processor answers from now on for every key it has seen (the buyer authorized)."""
        for key in self.done:
            self.done[key] = result


class Held(Scripted):
    """Scripted, but each charge waits for the test's ``go`` once it has said it ``started``: a
    completion still charging while another request comes in."""

    def __init__(self, *answers: ChargeResult | BaseException) -> None:
        super().__init__(*answers)
        self.started = threading.Event()
        self.go = threading.Event()

    def charge(self, charge: Charge) -> ChargeResult:
        self.started.set()
        assert self.go.wait(10), "the test never let the charge answer"
        return super().charge(charge)
