"""The store's signing keys, kept on disk in the data directory, and the text form the audit trail
publishes a public key in (base64 of its raw bytes; the market's messages write Ed25519 keys as
"0x" + hex instead, see ``trust/messages.py``).

The store has two keys, one of each :class:`KeyType`: an Ed25519 key (:data:`ED25519`, JWS
``EdDSA``) that signs the agents.json audit trails, and a P-256 key (:data:`P256`, JWS ``ES256``)
that signs what UCP asks an ECDSA signature for: the order webhooks and AP2's merchant
authorization (AP2 admits only ES256, ES384 and ES512). Both are kept, created and rotated the
same way, by :class:`SigningKeys`.

A key must survive restarts (artifacts and checkouts are verified against the key published)
and must never be readable by anyone but its owner, not even for the moment between creating and
chmod-ing a file.  Layout::

    <data_dir>/audit/                     mode 0700
        signing_key.pem                   current Ed25519 key, PKCS8 PEM, mode 0600
        public_keys.txt                   every Ed25519 public key ever used, one per line
        signing_key_es256.pem             current P-256 key, PKCS8 PEM, mode 0600
        public_keys_es256.txt             every P-256 public key ever used, one per line
        retired/<UTC time>-<key id>.pem   keys replaced by rotate(), mode 0600

The ``public_keys`` files are the durable record for verifying old artifacts: the retired
private keys may be deleted without losing it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

# DER prefix of an Ed25519 SubjectPublicKeyInfo: the agents.json spec's example key has it,
# our format does not, so decoding can say which form it was given.
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


class InsecureKeyFileError(PermissionError):
    """The key file is accessible to group or others, so it may already be compromised."""


class PublicKeyError(ValueError):
    """A value is not a public key in our form (base64 of the raw 32-byte Ed25519 key); the message says why."""


@dataclass(frozen=True)
class KeyType:
    """What sets one kind of store key apart: its JWS algorithm, its files, and how a key of it is
    made, recognised, signs and shows its public half. Storage, permissions and rotation are the same
    for every kind (:class:`SigningKeys`)."""

    #: The JWS ``alg`` its signatures are made for (RFC 8037, RFC 7518).
    algorithm: str
    #: The current key's file name without ``.pem``.
    stem: str
    #: The file that records every public key of this kind the store has used.
    records: str
    generate: Callable[[], Any]
    #: Whether a loaded private key is of this kind.
    holds: Callable[[object], bool]
    #: The raw bytes of a private key's public half, which every text form encodes.
    public_bytes: Callable[[Any], bytes]
    #: The signature of bytes in its JWS form.
    sign: Callable[[Any, bytes], bytes]


def _es256_sign(key: ec.EllipticCurvePrivateKey, data: bytes) -> bytes:
    """ECDSA P-256 with SHA-256 in JWS form (RFC 7518, 3.4): R and S as 32 big-endian bytes each,
    not the DER that ``cryptography`` returns."""
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


#: The audit trail's key: Ed25519 (``EdDSA``); its public key is the raw 32 bytes.
ED25519 = KeyType("EdDSA", "signing_key", "public_keys.txt", Ed25519PrivateKey.generate,
                  lambda key: isinstance(key, Ed25519PrivateKey), lambda key: raw_public_key(key),
                  lambda key, data: key.sign(data))
#: UCP's key: ECDSA on P-256 (``ES256``); its public key is the uncompressed point (65 bytes, SEC 1).
P256 = KeyType("ES256", "signing_key_es256", "public_keys_es256.txt", lambda: ec.generate_private_key(ec.SECP256R1()),
               lambda key: isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1),
               lambda key: key.public_key().public_bytes(serialization.Encoding.X962,
                                                         serialization.PublicFormat.UncompressedPoint),
               _es256_sign)


class SigningKeys:
    """Lazily created, persistent signing key of one :class:`KeyType` (by default the Ed25519 key)
    under ``<data_dir>/audit``."""

    def __init__(self, data_dir: Path, kind: KeyType = ED25519) -> None:
        self.kind = kind
        self.directory = Path(data_dir) / "audit"
        self.key_path = self.directory / f"{kind.stem}.pem"
        self.retired_dir = self.directory / "retired"
        self.public_keys_path = self.directory / kind.records
        self._key: Any = None

    @property
    def algorithm(self) -> str:
        """The JWS ``alg`` of this key's signatures."""
        return self.kind.algorithm

    @property
    def public_key_b64(self) -> str:
        """Base64 of the raw public key (Ed25519: the manifest's ``audit.public_key``)."""
        return self._encode(self._private_key())

    def sign(self, data: bytes) -> str:
        """Base64 of the signature of ``data`` in its JWS form (Ed25519 and ES256: 64 bytes)."""
        return base64.b64encode(self.kind.sign(self._private_key(), data)).decode("ascii")

    def _encode(self, key: Any) -> str:
        return base64.b64encode(self.kind.public_bytes(key)).decode("ascii")

    def known_public_keys(self) -> list[str]:
        """Every public key this store has signed with, oldest first, the current one included."""
        current = self.public_key_b64
        keys: list[str] = []
        if self.public_keys_path.exists():
            for line in self.public_keys_path.read_text(encoding="ascii").splitlines():
                if line.strip() and line.strip() not in keys:
                    keys.append(line.strip())
        if current not in keys:
            keys.append(current)
        return keys

    def rotate(self) -> str:
        """Replace the key with a new one and return the new public key.

        The old key is kept in ``retired/`` and stays in ``known_public_keys()``,
        so artifacts it signed remain verifiable.  Other processes holding the
        old key in memory keep signing with it until they restart; their
        artifacts name that key and still verify.
        """
        old = self._private_key()
        self.retired_dir.mkdir(mode=0o700, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        retired = self.retired_dir / f"{stamp}-{key_id(self._encode(old))}.pem"
        # A hard link keeps the current key in place until the new one replaces
        # it, so a process starting mid-rotation never finds no key and makes its own.
        os.link(self.key_path, retired)
        new = self.kind.generate()
        temp = self._write_temp(new)
        os.replace(temp, self.key_path)
        self._key = new
        self._record_public_key(new)
        return self.public_key_b64

    def _private_key(self) -> Any:
        if self._key is None:
            self._key = self._load() if self.key_path.exists() else self._create()
        return self._key

    def _load(self) -> Any:
        mode = stat.S_IMODE(self.key_path.stat().st_mode)
        if mode & 0o077:
            raise InsecureKeyFileError(
                f"refusing to use {self.key_path}: mode {mode:04o} lets group or others access it; "
                f"if no one else could have read it, run `chmod 600 {self.key_path}`, otherwise rotate the key"
            )
        key = serialization.load_pem_private_key(self.key_path.read_bytes(), password=None)
        if not self.kind.holds(key):
            raise ValueError(f"{self.key_path} does not hold an {self.kind.algorithm} private key")
        return key

    def _create(self) -> Any:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)  # mkdir's mode is filtered by the umask
        key = self.kind.generate()
        temp = self._write_temp(key)
        try:
            # link() never overwrites: if another process created the key since
            # our exists() check, use theirs so both sign with the same key.
            os.link(temp, self.key_path)
        except FileExistsError:
            return self._load()
        finally:
            temp.unlink()
        self._record_public_key(key)
        return key

    def _write_temp(self, key: Any) -> Path:
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        temp = self.directory / f".{self.kind.stem}.{uuid.uuid4().hex}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        return temp

    def _record_public_key(self, key: Any) -> None:
        # O_APPEND writes of one short line are atomic, so concurrent starts cannot interleave.
        fd = os.open(self.public_keys_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        with os.fdopen(fd, "a", encoding="ascii") as handle:
            handle.write(self._encode(key) + "\n")


def key_id(public_key_b64: str) -> str:
    """Short fingerprint of a public key (first 12 hex digits of SHA-256 of its raw bytes)."""
    return hashlib.sha256(base64.b64decode(public_key_b64)).hexdigest()[:12]


def raw_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of a public key (of a private key: its public key), which every text form encodes."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def encode_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """Base64 of the raw 32-byte public key: the form the audit trail publishes a key in."""
    return base64.b64encode(raw_public_key(key)).decode("ascii")


def decode_public_key(value: str) -> Ed25519PublicKey:
    """The key ``encode_public_key`` wrote; PublicKeyError names what is wrong with anything else."""
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise PublicKeyError(f"is not valid base64: {value!r}") from None
    if len(raw) != 32:
        hint = " (a DER SubjectPublicKeyInfo; the raw key is its last 32 bytes)" if raw.startswith(_SPKI_PREFIX) else ""
        raise PublicKeyError(f"must be base64 of the raw 32-byte Ed25519 key, found {len(raw)} bytes{hint}")
    return Ed25519PublicKey.from_public_bytes(raw)
