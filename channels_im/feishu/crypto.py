"""Verifying and decrypting Feishu callbacks.

Feishu signs every callback of an app with an Encrypt Key as
``sha256(timestamp + nonce + encrypt_key + raw_body).hexdigest()`` and encrypts the body as
``{"encrypt": base64(iv + AES-256-CBC(sha256(encrypt_key), iv, PKCS#7(json)))}``. These helpers
only ever return a verdict or raise :class:`UndecryptableError`; they never look inside the
plaintext.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

AES_BLOCK_BYTES = 16


class UndecryptableError(ValueError):
    """The ``encrypt`` field is not base64, not whole AES blocks, or not PKCS#7-padded."""


def _utf8(text: str) -> bytes:
    # Header values come from the network: anything that does not encode cleanly simply cannot
    # match a signature, so it is replaced rather than allowed to raise.
    return text.encode("utf-8", errors="replace")


def expected_signature(*, timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    """The hex signature Feishu sends in ``X-Lark-Signature`` for ``body``."""
    return hashlib.sha256(_utf8(timestamp + nonce + encrypt_key) + body).hexdigest()


def signature_matches(*, signature: str, timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> bool:
    """Whether ``signature`` signs ``body`` with this key. Constant time in the signature, so an
    attacker learns nothing from how long a wrong guess took."""
    expected = expected_signature(timestamp=timestamp, nonce=nonce, encrypt_key=encrypt_key, body=body)
    return hmac.compare_digest(expected.encode("ascii"), _utf8(signature))


def decrypt(*, encrypt_key: str, ciphertext: str) -> bytes:
    """The plaintext of an ``encrypt`` field. Raises :class:`UndecryptableError`.

    Only call this on a request whose signature was verified (or answer every failure the same
    way): distinguishable padding errors on attacker-chosen ciphertexts are a padding oracle.
    """
    try:
        raw = base64.b64decode(ciphertext, validate=True)
    except (binascii.Error, ValueError):
        raise UndecryptableError("the encrypt field is not base64") from None
    # At least the IV and one block; CBC works on whole blocks only.
    if len(raw) < 2 * AES_BLOCK_BYTES or len(raw) % AES_BLOCK_BYTES:
        raise UndecryptableError("the encrypt field is not a whole number of AES blocks")
    key = hashlib.sha256(_utf8(encrypt_key)).digest()
    decryptor = Cipher(algorithms.AES(key), modes.CBC(raw[:AES_BLOCK_BYTES])).decryptor()
    padded = decryptor.update(raw[AES_BLOCK_BYTES:]) + decryptor.finalize()
    unpadder = padding.PKCS7(AES_BLOCK_BYTES * 8).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:
        raise UndecryptableError("bad PKCS#7 padding: wrong Encrypt Key or a damaged body") from None
