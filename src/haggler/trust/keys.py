"""Ed25519 keys: the store's signing key, kept on disk in the data directory, and the text form
the audit trail publishes a public key in (base64 of its raw 32 bytes; the market's messages
write keys as "0x" + hex instead, see ``trust/messages.py``).

The key must survive restarts (artifacts are verified against the key the
manifest publishes) and must never be readable by anyone but its owner, not
even for the moment between creating and chmod-ing a file.  Layout::

    <data_dir>/audit/                     mode 0700
        signing_key.pem                   current key, PKCS8 PEM, mode 0600
        retired/<UTC time>-<key id>.pem   keys replaced by rotate(), mode 0600
        public_keys.txt                   every public key ever used, one per line

``public_keys.txt`` is the durable record for verifying old artifacts: the
retired private keys may be deleted without losing it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import stat
import uuid
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

# DER prefix of an Ed25519 SubjectPublicKeyInfo: the agents.json spec's example key has it,
# our format does not, so decoding can say which form it was given.
_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


class InsecureKeyFileError(PermissionError):
    """The key file is accessible to group or others, so it may already be compromised."""


class PublicKeyError(ValueError):
    """A value is not a public key in our form (base64 of the raw 32-byte Ed25519 key); the message says why."""


class SigningKeys:
    """Lazily created, persistent Ed25519 signing key under ``<data_dir>/audit``."""

    def __init__(self, data_dir: Path) -> None:
        self.directory = Path(data_dir) / "audit"
        self.key_path = self.directory / "signing_key.pem"
        self.retired_dir = self.directory / "retired"
        self.public_keys_path = self.directory / "public_keys.txt"
        self._key: Ed25519PrivateKey | None = None

    @property
    def public_key_b64(self) -> str:
        """Base64 of the raw 32-byte public key: the manifest's ``audit.public_key``."""
        return encode_public_key(self._private_key())

    def sign(self, data: bytes) -> str:
        """Base64 Ed25519 signature of ``data``."""
        return base64.b64encode(self._private_key().sign(data)).decode("ascii")

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
        retired = self.retired_dir / f"{stamp}-{key_id(encode_public_key(old))}.pem"
        # A hard link keeps the current key in place until the new one replaces
        # it, so a process starting mid-rotation never finds no key and makes its own.
        os.link(self.key_path, retired)
        new = Ed25519PrivateKey.generate()
        temp = self._write_temp(new)
        os.replace(temp, self.key_path)
        self._key = new
        self._record_public_key(new)
        return self.public_key_b64

    def _private_key(self) -> Ed25519PrivateKey:
        if self._key is None:
            self._key = self._load() if self.key_path.exists() else self._create()
        return self._key

    def _load(self) -> Ed25519PrivateKey:
        mode = stat.S_IMODE(self.key_path.stat().st_mode)
        if mode & 0o077:
            raise InsecureKeyFileError(
                f"refusing to use {self.key_path}: mode {mode:04o} lets group or others access it; "
                f"if no one else could have read it, run `chmod 600 {self.key_path}`, otherwise rotate the key"
            )
        key = serialization.load_pem_private_key(self.key_path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{self.key_path} does not hold an Ed25519 private key")
        return key

    def _create(self) -> Ed25519PrivateKey:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)  # mkdir's mode is filtered by the umask
        key = Ed25519PrivateKey.generate()
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

    def _write_temp(self, key: Ed25519PrivateKey) -> Path:
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        temp = self.directory / f".signing_key.{uuid.uuid4().hex}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        return temp

    def _record_public_key(self, key: Ed25519PrivateKey) -> None:
        # O_APPEND writes of one short line are atomic, so concurrent starts cannot interleave.
        fd = os.open(self.public_keys_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        with os.fdopen(fd, "a", encoding="ascii") as handle:
            handle.write(encode_public_key(key) + "\n")


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
