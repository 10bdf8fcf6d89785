"""Pictures and PDFs made fit for the API: downscaled, recompressed, converted, or refused clearly."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from agent.images import MAX_IMAGE_TOKENS, image_size, image_tokens, media_tokens
from gateway.errors import MediaError
from gateway.serving.media import (
    MAX_DECLARED_PIXELS,
    MAX_IMAGE_B64,
    prepare_image,
    prepare_pdf,
    reads_pdfs,
)
from tests.fakes.anthropic_media import media_problems
from tests.media_files import pdf, picture, png_bomb
from tests.memory_probe import peak_rss


def accepted_by_the_api(block: dict[str, object]) -> bool:
    return media_problems([{"role": "user", "content": [block]}]) == []


def test_a_large_photo_is_downscaled_to_what_the_api_would_use() -> None:
    image = prepare_image(picture(4000, 3000), max_edge=1568)
    assert max(image.width, image.height) <= 1568 and image.width * image.height <= 1_150_000
    assert image.media_type == "image/jpeg" and len(image.data) <= MAX_IMAGE_B64
    assert accepted_by_the_api(image.block())
    assert image_size(image.data) == (image.width, image.height)


def test_a_small_supported_picture_is_kept_as_it_is() -> None:
    data = picture(300, 200, fmt="PNG")
    image = prepare_image(data)
    assert (image.media_type, image.data) == ("image/png", base64.b64encode(data).decode())


def test_other_formats_are_converted_and_transparency_kept_as_png() -> None:
    assert prepare_image(picture(200, 100, fmt="BMP")).media_type == "image/jpeg"
    transparent = prepare_image(picture(2400, 2400, fmt="TIFF", mode="RGBA"))
    assert transparent.media_type == "image/png" and accepted_by_the_api(transparent.block())


def test_bytes_that_are_no_picture_are_refused_in_one_sentence() -> None:
    with pytest.raises(MediaError, match="I could not read this file"):
        prepare_image(b"PK\x03\x04 this is a zip file")


def test_token_estimates_use_the_api_formula_capped() -> None:
    assert image_tokens(200, 200) == 54  # 40,000 / 750, rounded up
    assert image_tokens(4000, 3000) == MAX_IMAGE_TOKENS
    small = prepare_image(picture(300, 150, fmt="PNG"))
    assert media_tokens(small.block()) == 60


def test_a_pdf_is_a_document_block_for_models_that_read_pdfs_else_its_text() -> None:
    data = pdf(["Quarterly budget: 42 units", "Second page"])
    document = prepare_pdf(data, as_document=True, max_pages=100, max_chars=10_000)
    block = document.block("budget.pdf")
    assert block["type"] == "document" and accepted_by_the_api(block) and document.pages == 2
    assert media_tokens(block) == 2 * 2000
    text = prepare_pdf(data, as_document=False, max_pages=100, max_chars=10_000)
    assert "Quarterly budget: 42 units" in str(text.block("budget.pdf")["text"])
    assert reads_pdfs("claude-sonnet-4-6") and not reads_pdfs("claude-3-haiku-20240307")


def test_a_pdf_over_the_page_limit_is_read_as_text_with_a_note() -> None:
    data = pdf([f"page {n}" for n in range(5)])
    result = prepare_pdf(data, as_document=True, max_pages=3, max_chars=10_000)
    assert result.data is None and result.note is not None and "page 2" in (result.text or "")
    assert "page 4" not in (result.text or "")


def test_the_fake_api_refuses_what_the_real_one_refuses() -> None:
    good = prepare_image(picture(100, 100, fmt="PNG")).block()
    wrong_type = {**good, "source": {**good["source"], "media_type": "image/jpeg"}}  # type: ignore[dict-item]
    not_base64 = {**good, "source": {**good["source"], "data": "@@not base64@@"}}  # type: ignore[dict-item]
    bmp = {"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": "AAAA"}}
    assert "does not match" in media_problems([{"role": "user", "content": [wrong_type]}])[0]
    assert "invalid base64" in media_problems([{"role": "user", "content": [not_base64]}])[0]
    assert "media_type" in media_problems([{"role": "user", "content": [bmp]}])[0]
    assert "only allowed in user" in media_problems([{"role": "assistant", "content": [good]}])[0]


BOMB_RISE_LIMIT = 150_000_000
"""Decoding the 13,000 x 13,000 bomb takes 676 MB at least; refusing it from its header, nothing."""


def test_a_png_bomb_is_refused_from_its_header_without_being_decoded() -> None:
    bomb = png_bomb(13_000, 13_000)
    assert len(bomb) < 1_000_000
    with peak_rss() as memory, pytest.raises(MediaError, match="too many pixels") as refused:
        prepare_image(bomb)
    assert memory.rise < BOMB_RISE_LIMIT, f"RSS rose {memory.rise / 1e6:.0f} MB"
    assert "\n" not in str(refused.value)


def test_a_picture_just_over_the_declared_cap_is_refused() -> None:
    side = int(MAX_DECLARED_PIXELS**0.5) + 1
    with peak_rss() as memory, pytest.raises(MediaError, match="up to 64 megapixels"):
        prepare_image(png_bomb(side, side))
    assert memory.rise < BOMB_RISE_LIMIT


def test_a_png_over_the_decode_cap_is_refused_but_a_jpeg_that_size_is_read_reduced() -> None:
    with pytest.raises(MediaError, match="PNG pictures up to 24 megapixels"):
        prepare_image(png_bomb(6000, 4001))
    large = Image.new("RGB", (6000, 4001), (200, 30, 30))
    out = io.BytesIO()
    large.save(out, format="JPEG")
    with peak_rss() as memory:
        image = prepare_image(out.getvalue())
    assert image.media_type == "image/jpeg" and image.width * image.height <= 1_150_000
    assert memory.rise < 6000 * 4001 * 3 // 2  # decoded at a reduced scale, never whole


def test_pillows_own_bomb_limit_is_set_explicitly_to_the_declared_cap() -> None:
    assert Image.MAX_IMAGE_PIXELS == MAX_DECLARED_PIXELS
