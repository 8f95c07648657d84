"""WeCom's callback crypto (企业微信 "加解密方案"), on ``cryptography``.

A callback carries ``msg_signature``, ``timestamp`` and ``nonce`` in its query string and an
``Encrypt`` field (base64) in its body (for the URL check: the ``echostr`` parameter):

- ``msg_signature = sha1("".join(sorted([token, timestamp, nonce, encrypt]))).hexdigest()``;
- ``AESKey = b64decode(EncodingAESKey + "=")`` (32 bytes), ``IV = AESKey[:16]``, AES-256-CBC;
- plaintext = 16 random bytes + 4-byte network-order length + message + receive_id, PKCS#7
  padded to a multiple of **32** bytes; receive_id is the corp id, and must be ours.

These helpers only return a verdict or raise :class:`UndecryptableError`; only call
:func:`decrypt` on a callback whose signature was verified (padding errors on attacker-chosen
ciphertexts would otherwise be an oracle).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

AES_BLOCK_BYTES = 16
PAD_BLOCK_BYTES = 32
"""WeCom pads to 32-byte blocks (not the AES block size): pad values run from 1 to 32."""
RANDOM_PREFIX_BYTES = 16
LENGTH_BYTES = 4
ENCODING_AES_KEY_CHARS = 43
_ENCODING_AES_KEY = re.compile(r"[A-Za-z0-9+/]{43}")


class UndecryptableError(ValueError):
    """Not base64, not whole blocks, bad padding, a length that does not fit, or another
    receiver's message (:class:`WrongReceiverError`)."""


class WrongReceiverError(UndecryptableError):
    """The message decrypts, but it is addressed to another corp id."""


def aes_key(encoding_aes_key: str) -> bytes:
    """The 32-byte AES key of a 43-character EncodingAESKey. Raises ``ValueError``."""
    if not isinstance(encoding_aes_key, str) or not _ENCODING_AES_KEY.fullmatch(encoding_aes_key):
        raise ValueError(f"the EncodingAESKey must be {ENCODING_AES_KEY_CHARS} letters and digits")
    key = base64.b64decode(encoding_aes_key + "=")
    if len(key) != 32:  # unreachable for 43 base64 characters; kept as the contract
        raise ValueError("the EncodingAESKey does not decode to 32 bytes")
    return key


def _utf8(text: str) -> bytes:
    # Query parameters come from the network: what does not encode cleanly cannot match.
    return text.encode("utf-8", errors="replace")


def signature(*, token: str, timestamp: str, nonce: str, encrypt: str) -> str:
    """The ``msg_signature`` WeCom sends for these values."""
    parts = sorted(_utf8(part) for part in (token, timestamp, nonce, encrypt))
    return hashlib.sha1(b"".join(parts)).hexdigest()  # noqa: S324  (WeCom's algorithm)


def signature_matches(*, msg_signature: str, token: str, timestamp: str, nonce: str, encrypt: str) -> bool:
    """Whether ``msg_signature`` signs these values with ``token``, in constant time."""
    if not isinstance(msg_signature, str) or not token:
        return False
    expected = signature(token=token, timestamp=timestamp, nonce=nonce, encrypt=encrypt)
    return hmac.compare_digest(expected.encode("ascii"), _utf8(msg_signature))


def _cipher(key: bytes) -> Cipher:
    return Cipher(algorithms.AES(key), modes.CBC(key[:AES_BLOCK_BYTES]))


def decrypt(*, key: bytes, encrypt: str, receive_id: str) -> bytes:
    """The message inside ``encrypt``. Raises :class:`UndecryptableError`, or
    :class:`WrongReceiverError` when it is addressed to another receive_id (corp id)."""
    try:
        raw = base64.b64decode(encrypt, validate=True)
    except (binascii.Error, ValueError):
        raise UndecryptableError("the Encrypt field is not base64") from None
    if not raw or len(raw) % PAD_BLOCK_BYTES:
        raise UndecryptableError("the Encrypt field is not a whole number of 32-byte blocks")
    decryptor = _cipher(key).decryptor()
    padded = decryptor.update(raw) + decryptor.finalize()
    pad = padded[-1]
    if not 1 <= pad <= PAD_BLOCK_BYTES or padded[-pad:] != bytes([pad]) * pad:
        raise UndecryptableError("bad PKCS#7 padding: wrong EncodingAESKey or a damaged body")
    content = padded[RANDOM_PREFIX_BYTES:-pad]
    if len(content) < LENGTH_BYTES:
        raise UndecryptableError("the plaintext is too short")
    (length,) = struct.unpack("!I", content[:LENGTH_BYTES])
    message, sender = content[LENGTH_BYTES : LENGTH_BYTES + length], content[LENGTH_BYTES + length :]
    if len(message) != length:
        raise UndecryptableError("the plaintext's length field does not fit")
    if not hmac.compare_digest(sender, _utf8(receive_id)):
        raise WrongReceiverError("the message is addressed to another corp id")
    return message


def encrypt(*, key: bytes, message: bytes, receive_id: str, random_prefix: bytes | None = None) -> str:
    """``message`` encrypted for ``receive_id`` as WeCom does (the passive-reply direction)."""
    prefix = os.urandom(RANDOM_PREFIX_BYTES) if random_prefix is None else random_prefix
    if len(prefix) != RANDOM_PREFIX_BYTES:
        raise ValueError("the random prefix is 16 bytes")
    plain = prefix + struct.pack("!I", len(message)) + message + _utf8(receive_id)
    pad = PAD_BLOCK_BYTES - len(plain) % PAD_BLOCK_BYTES
    encryptor = _cipher(key).encryptor()
    sealed = encryptor.update(plain + bytes([pad]) * pad) + encryptor.finalize()
    return base64.b64encode(sealed).decode("ascii")
