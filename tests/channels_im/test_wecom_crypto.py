"""WeCom's callback crypto, on ``cryptography``: WeCom's own published test vectors, and wechatpy's
``WeChatCrypto`` as an independent peer that must accept and refuse what ours does.

The vectors are those of WeCom's official sample (``weworkapi_python``, ``callback/Sample.py``):
token ``hJqcu3uJ9Tn2gXPmxx2w9kkCkCE2EPYo``, EncodingAESKey ``6qkdMrq6…RToqhUt``, corp id
``ww1436e0e65a779aee``; a URL check whose echostr decrypts to ``1288432023552776189`` and a text
message "你好" from ``ChenJiaShun``.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from hypothesis import given, settings
from hypothesis import strategies as st
from wechatpy.enterprise.crypto import WeChatCrypto
from wechatpy.exceptions import InvalidSignatureException

from channels_im.wecom import crypto

TOKEN = "hJqcu3uJ9Tn2gXPmxx2w9kkCkCE2EPYo"
ENCODING_AES_KEY = "6qkdMrq68nTKduznJYO1A37W2oEgpkMUvkttRToqhUt"
CORP_ID = "ww1436e0e65a779aee"
KEY = crypto.aes_key(ENCODING_AES_KEY)

URL_CHECK = {
    "msg_signature": "012bc692d0a58dd4b10f8dfe5c4ac00ae211ebeb",
    "timestamp": "1476416373",
    "nonce": "47744683",
    "encrypt": "fsi1xnbH4yQh0+PJxcOdhhK6TDXkjMyhEPA7xB2TGz6b+g7xyAbEkRxN/3cNXW9qdqjnoVzEtpbhnFyq6SVHyA==",
}
MESSAGE = {
    "msg_signature": "0c3914025cb4b4d68103f6bfc8db550f79dcf48e",
    "timestamp": "1476422779",
    "nonce": "1597212914",
    "encrypt": (
        "Kl7kjoSf6DMD1zh7rtrHjFaDapSCkaOnwu3bqLc5tAybhhMl9pFeK8NslNPVdMwmBQTNoW4mY7AIjeLvEl3NyeTkAgGzBhzTtRLN"
        "shw2AEew+kkYcD+Fq72Kt00fT0WnN87hGrW8SqGc+NcT3mu87Ha3dz1pSDi6GaUA6A0sqfde0VJPQbZ9U+3JWcoD4Z5jaU0y9GSh0"
        "10wsHF8KZD24YhmZH4ch4Ka7ilEbjbfvhKkNL65HHL0J6EYJIZUC2pFrdkJ7MhmEbU2qARR4iQHE7wy24qy0cRX3Mfp6iELcDNfS"
        "sPGjUQVDGxQDCWjayJOpcwocugux082f49HKYg84EpHSGXAyh+/oxwaWbvL6aSDPOYuPDGOCI8jmnKiypE+"
    ),
}
MESSAGE_PLAINTEXT = (
    "<xml><ToUserName>ww1436e0e65a779aee</ToUserName><FromUserName>ChenJiaShun</FromUserName>"
    "<CreateTime>1476422779</CreateTime><MsgType>text</MsgType><Content>你好</Content>"
    "<MsgId>1456453720</MsgId><AgentID>1000002</AgentID></xml>"
)


def ours_accepts(
    vector: dict[str, str], *, token: str = TOKEN, key: bytes = KEY, corp_id: str = CORP_ID
) -> bool:
    if not crypto.signature_matches(token=token, **vector):
        return False
    try:
        crypto.decrypt(key=key, encrypt=vector["encrypt"], receive_id=corp_id)
    except crypto.UndecryptableError:
        return False
    return True


def peer_accepts(
    vector: dict[str, str],
    *,
    token: str = TOKEN,
    encoding_aes_key: str = ENCODING_AES_KEY,
    corp_id: str = CORP_ID,
) -> bool:
    peer = WeChatCrypto(token, encoding_aes_key, corp_id)
    try:
        peer.check_signature(vector["msg_signature"], vector["timestamp"], vector["nonce"], vector["encrypt"])
    except Exception:  # InvalidSignatureException, InvalidCorpIdException, decoding errors
        return False
    return True


# --- the published vectors -----------------------------------------------------------------------


def test_it_verifies_and_decrypts_wecoms_published_url_check() -> None:
    assert (
        crypto.signature(token=TOKEN, **{k: v for k, v in URL_CHECK.items() if k != "msg_signature"})
        == (URL_CHECK["msg_signature"])
    )
    assert crypto.signature_matches(token=TOKEN, **URL_CHECK)
    assert crypto.decrypt(key=KEY, encrypt=URL_CHECK["encrypt"], receive_id=CORP_ID) == b"1288432023552776189"


def test_it_verifies_and_decrypts_wecoms_published_message() -> None:
    assert crypto.signature_matches(token=TOKEN, **MESSAGE)
    plaintext = crypto.decrypt(key=KEY, encrypt=MESSAGE["encrypt"], receive_id=CORP_ID)
    assert plaintext.decode() == MESSAGE_PLAINTEXT


@pytest.mark.parametrize("field", ["timestamp", "nonce", "encrypt"])
def test_it_refuses_the_published_signature_once_anything_it_covers_changed(field: str) -> None:
    vector = dict(MESSAGE)
    vector[field] = vector[field][:-2] + ("1" if field != "encrypt" else "A=")
    assert not crypto.signature_matches(token=TOKEN, **vector)
    assert not crypto.signature_matches(token=TOKEN + "x", **MESSAGE)
    assert not crypto.signature_matches(
        token=TOKEN, **{**MESSAGE, "msg_signature": MESSAGE["msg_signature"].upper()}
    )


def test_it_refuses_wecoms_published_message_when_addressed_to_another_corp() -> None:
    with pytest.raises(crypto.WrongReceiverError):
        crypto.decrypt(key=KEY, encrypt=MESSAGE["encrypt"], receive_id="ww0000000000000000")
    with pytest.raises(crypto.WrongReceiverError):  # a prefix of ours is not ours either
        crypto.decrypt(key=KEY, encrypt=MESSAGE["encrypt"], receive_id=CORP_ID[:-1])


# --- wechatpy as the peer ------------------------------------------------------------------------


def _sealed_by_peer(message: str, *, token: str = TOKEN, key: str = ENCODING_AES_KEY, corp: str = CORP_ID):
    import xmltodict

    sealed = xmltodict.parse(WeChatCrypto(token, key, corp).encrypt_message(message, "4711", "1700000000"))[
        "xml"
    ]
    return {
        "msg_signature": sealed["MsgSignature"],
        "timestamp": "1700000000",
        "nonce": "4711",
        "encrypt": sealed["Encrypt"],
    }


OTHER_KEY = "Z" * 42 + "A"
VARIANTS: dict[str, Any] = {
    "genuine": lambda: _sealed_by_peer("<xml>ok</xml>"),
    "the published url check": lambda: dict(URL_CHECK),
    "the published message": lambda: dict(MESSAGE),
    "signed with another token": lambda: _sealed_by_peer("<xml>ok</xml>", token="AnotherToken"),
    "sealed with another EncodingAESKey": lambda: _sealed_by_peer("<xml>ok</xml>", key=OTHER_KEY),
    "for another corp": lambda: _sealed_by_peer("<xml>ok</xml>", corp="ww0ther0corp"),
    "a forged signature": lambda: {**_sealed_by_peer("<xml>ok</xml>"), "msg_signature": "0" * 40},
    "a replaced nonce": lambda: {**_sealed_by_peer("<xml>ok</xml>"), "nonce": "4712"},
    "an empty signature": lambda: {**_sealed_by_peer("<xml>ok</xml>"), "msg_signature": ""},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_it_and_wechatpy_accept_and_refuse_the_same_callbacks(variant: str) -> None:
    vector = VARIANTS[variant]()
    assert ours_accepts(vector) == peer_accepts(vector)
    assert ours_accepts(vector) is (
        variant in ("genuine", "the published url check", "the published message")
    )


@settings(max_examples=60, deadline=None)
@given(message=st.text(min_size=0, max_size=300), corp=st.from_regex(r"ww[a-z0-9]{4,30}", fullmatch=True))
def test_what_either_side_encrypts_the_other_decrypts_exactly(message: str, corp: str) -> None:
    peer = WeChatCrypto(TOKEN, ENCODING_AES_KEY, corp)
    vector = _sealed_by_peer(message, corp=corp)
    assert crypto.decrypt(key=KEY, encrypt=vector["encrypt"], receive_id=corp).decode() == message

    ours = crypto.encrypt(key=KEY, message=message.encode(), receive_id=corp)
    signature = crypto.signature(token=TOKEN, timestamp="1", nonce="2", encrypt=ours)
    assert peer.check_signature(signature, "1", "2", ours) == message


def test_a_signature_the_peer_refuses_is_refused_by_ours_and_not_decrypted_first() -> None:
    vector = {**_sealed_by_peer("<xml>ok</xml>"), "msg_signature": "f" * 40}
    with pytest.raises(InvalidSignatureException):
        WeChatCrypto(TOKEN, ENCODING_AES_KEY, CORP_ID).check_signature(
            vector["msg_signature"], vector["timestamp"], vector["nonce"], vector["encrypt"]
        )
    assert not crypto.signature_matches(token=TOKEN, **vector)


# --- what ours refuses beyond the peer -----------------------------------------------------------


def _raw_sealed(plain: bytes) -> str:
    encryptor = Cipher(algorithms.AES(KEY), modes.CBC(KEY[:16])).encryptor()
    return base64.b64encode(encryptor.update(plain) + encryptor.finalize()).decode()


_HEAD = b"\x00" * 16 + struct.pack("!I", 2) + b"ok" + CORP_ID.encode()  # 40 bytes: 24 to pad


@pytest.mark.parametrize(
    "plain",
    [
        pytest.param(_HEAD + b"\x17" + b"\x18" * 23, id="inconsistent-padding"),
        pytest.param(_HEAD + b"\x00" * 24, id="zero-pad"),
        pytest.param(
            _HEAD.replace(struct.pack("!I", 2), struct.pack("!I", 9999)) + b"\x18" * 24, id="long-length"
        ),
        pytest.param(b"\x00" * 32 + b"\x21" * 32, id="pad-above-32"),
    ],
)
def test_it_refuses_malformed_plaintexts_even_where_the_peer_does_not_check(plain: bytes) -> None:
    # Only the holder of the EncodingAESKey can make these (behind a valid signature), so they
    # are no forgery; still, ours refuses them all. wechatpy strips the padding by its last byte
    # without checking the others, and so accepts the inconsistent padding: the one place where
    # the peers differ, on purpose.
    assert len(plain) % 32 == 0
    encrypt = _raw_sealed(plain)
    with pytest.raises(crypto.UndecryptableError):
        crypto.decrypt(key=KEY, encrypt=encrypt, receive_id=CORP_ID)
    vector = {"timestamp": "1", "nonce": "2", "encrypt": encrypt}
    vector["msg_signature"] = crypto.signature(token=TOKEN, **vector)
    assert peer_accepts(vector) is (plain.endswith(b"\x17" + b"\x18" * 23))


@pytest.mark.parametrize(
    "encrypt",
    ["", "not base64!", "QUJD", base64.b64encode(b"x" * 16).decode(), base64.b64encode(b"x" * 33).decode()],
)
def test_it_refuses_an_encrypt_field_that_is_not_whole_blocks_of_base64(encrypt: str) -> None:
    with pytest.raises(crypto.UndecryptableError):
        crypto.decrypt(key=KEY, encrypt=encrypt, receive_id=CORP_ID)


@pytest.mark.parametrize("key", ["", "short", ENCODING_AES_KEY + "A", ENCODING_AES_KEY[:-1] + "=", "é" * 43])
def test_it_refuses_an_encoding_aes_key_that_is_not_43_base64_characters(key: str) -> None:
    with pytest.raises(ValueError, match="43 letters and digits"):
        crypto.aes_key(key)
