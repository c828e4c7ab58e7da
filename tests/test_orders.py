"""The buyer's details as the checkout form sends them: what is kept, what is refused and why."""

from __future__ import annotations

import pytest

from haggler.orders import Buyer, BuyerInvalid, read_buyer


def test_a_browsers_crlf_line_breaks_are_kept_as_one_kind_and_the_edges_trimmed():
    buyer = read_buyer({"name": "  Ada  ", "email": " ada@example.com ", "address": "1 Row\r\nLondon\rUK\n"})
    assert buyer == Buyer("Ada", "ada@example.com", "1 Row\nLondon\nUK")


def test_every_bad_field_is_named_at_once():
    with pytest.raises(BuyerInvalid) as caught:
        read_buyer({"name": "", "email": "a@b", "address": "x" * 1001})
    assert caught.value.problems == {"name": "required", "email": "not an email address (name@example.com)",
                                     "address": "at most 1000 characters"}


@pytest.mark.parametrize("email", ["plain", "a@b", "a b@c.d", "a@b..c", "@b.c", "a@.c"])
def test_what_is_not_an_email_address(email):
    with pytest.raises(BuyerInvalid, match="email"):
        read_buyer({"name": "A", "email": email, "address": "B"})


def test_the_confirmation_shows_the_email_masked():
    assert Buyer("A", "grace@example.com", "B").masked_email == "g•••@example.com"
