"""Pictures and PDFs made fit for the Messages API (pure conversions; run them in a thread).

Images: the API takes JPEG, PNG, GIF and WebP up to 5 MB (base64) and 8000 px, and scales
anything above ~1.15 megapixels (1568 px on the long edge) down itself, so we do it first:
fewer bytes stored and sent, the same picture for the model. Other formats Pillow reads (BMP,
TIFF...) are converted; an animated GIF or WebP becomes its first frame. PDFs go as
``document`` blocks to models that read them (the API's limits: 32 MB, 100 pages), else as
their extracted text.
"""

from __future__ import annotations

import base64
import io
import logging
import math
from dataclasses import dataclass

from PIL import Image, ImageOps

from agent.images import image_tokens
from agent.types import ContentBlock
from gateway.errors import MediaError

API_IMAGE_TYPES = {"JPEG": "image/jpeg", "PNG": "image/png", "GIF": "image/gif", "WEBP": "image/webp"}
MAX_IMAGE_B64 = 5 * 1024 * 1024
MAX_PIXELS = 1_150_000
MAX_DECLARED_PIXELS = 8000 * 8000
"""The API refuses a picture over 8000 x 8000; a larger one is refused from its header."""
MAX_DECODED_PIXELS = 24_000_000
"""Most pixels decoded at once (RGBA: 96 MB). A JPEG decodes at up to 1/8 scale (``draft``),
so this bounds only the formats that cannot: a 24 Mpx PNG, TIFF or WebP is still read."""
TOO_MANY_PIXELS = (
    f"it has too many pixels for me (I read pictures up to {MAX_DECLARED_PIXELS // 10**6} megapixels)"
)
UNREADABLE_PICTURE = "I could not read this file (it is damaged, or not a picture)"
UNREADABLE_PDF = "I could not read this file (it is damaged, or not a PDF)"
MAX_PDF_BYTES = 32 * 1024 * 1024
JPEG_QUALITIES = (85, 75, 60, 45)
# Models without PDF support (document blocks); everything newer reads PDFs.
_NO_PDF_PREFIXES = ("claude-2", "claude-instant", "claude-3-haiku", "claude-3-opus", "claude-3-sonnet")


# pypdf warns about a damaged file by quoting its bytes (what a user sent, into our logs), and
# one of its warnings fails to format; its errors still reach us as exceptions.
logging.getLogger("pypdf").setLevel(logging.ERROR)

# Pillow's own bomb check, set explicitly: it warns above this and raises at twice this.
Image.MAX_IMAGE_PIXELS = MAX_DECLARED_PIXELS


@dataclass(frozen=True, slots=True)
class PreparedImage:
    media_type: str
    data: str  # base64
    width: int
    height: int

    @property
    def tokens(self) -> int:
        return image_tokens(self.width, self.height)

    def block(self) -> ContentBlock:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": self.media_type, "data": self.data},
        }


def _fitted_size(width: int, height: int, max_edge: int) -> tuple[int, int]:
    scale = min(1.0, max_edge / max(width, height), math.sqrt(MAX_PIXELS / (width * height)))
    return max(1, int(width * scale)), max(1, int(height * scale))


def _megapixels(pixels: int) -> str:
    return f"{pixels / 1_000_000:g} megapixels"


def _open(data: bytes) -> Image.Image:
    """The picture's header read (nothing decoded yet)."""
    try:
        return Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaError(TOO_MANY_PIXELS) from exc
    except Exception as exc:  # a decoder on untrusted bytes raises anything: it is not a picture we read
        raise MediaError(UNREADABLE_PICTURE) from exc


def _check_size(image: Image.Image, max_edge: int) -> None:
    """Refuse by the declared size, then let a JPEG decode at a reduced scale (``draft``), so
    that at most :data:`MAX_DECODED_PIXELS` are ever decoded at once."""
    width, height = image.size
    if width < 1 or height < 1:
        raise MediaError("the picture is empty")
    if width * height > MAX_DECLARED_PIXELS:
        raise MediaError(TOO_MANY_PIXELS)
    if image.format == "JPEG" and image.mode in ("RGB", "L", "CMYK", "YCbCr"):
        image.draft(image.mode, _fitted_size(width, height, max_edge))
    if image.size[0] * image.size[1] > MAX_DECODED_PIXELS:
        raise MediaError(
            f"it has too many pixels for me ({width:,} x {height:,}; I read {image.format or 'such'} "
            f"pictures up to {_megapixels(MAX_DECODED_PIXELS)}, JPEG up to "
            f"{_megapixels(MAX_DECLARED_PIXELS)})"
        )


def prepare_image(data: bytes, *, max_edge: int = 1568) -> PreparedImage:
    """``data`` as an image the API accepts, downscaled and recompressed when needed.

    Raises only :class:`MediaError`."""
    image = _open(data)
    try:
        return _prepare(image, data, max_edge)
    except MediaError:
        raise
    except Exception as exc:  # a truncated or corrupt file fails only when decoded, in any way
        raise MediaError(UNREADABLE_PICTURE) from exc
    finally:
        image.close()


def _prepare(image: Image.Image, data: bytes, max_edge: int) -> PreparedImage:
    width, height = image.size
    _check_size(image, max_edge)
    target = _fitted_size(width, height, max_edge)
    encoded = base64.b64encode(data).decode()
    animated = bool(getattr(image, "is_animated", False))
    if (
        image.format in API_IMAGE_TYPES
        and target == (width, height)
        and len(encoded) <= MAX_IMAGE_B64
        and not animated
    ):
        image.load()  # the whole file must decode, or the API would refuse it
        return PreparedImage(API_IMAGE_TYPES[image.format], encoded, width, height)
    image.seek(0)
    image.load()
    target = _fitted_size(*image.size, max_edge)
    # Scale first, then turn by the EXIF orientation: the turn copies only the small picture
    # (the fitted size does not depend on which edge is the long one).
    frame = image
    if frame.size != target:
        frame = frame.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
    return _encode(ImageOps.exif_transpose(frame))


def _encode(frame: Image.Image) -> PreparedImage:
    """PNG for pictures with transparency when it fits, else JPEG at the best quality that fits."""
    if frame.mode in ("RGBA", "LA") or (frame.mode == "P" and "transparency" in frame.info):
        out = io.BytesIO()
        frame.save(out, format="PNG", optimize=True)
        encoded = base64.b64encode(out.getvalue()).decode()
        if len(encoded) <= MAX_IMAGE_B64:
            return PreparedImage("image/png", encoded, *frame.size)
    rgb = frame.convert("RGB")
    for quality in JPEG_QUALITIES:
        out = io.BytesIO()
        rgb.save(out, format="JPEG", quality=quality, optimize=True)
        encoded = base64.b64encode(out.getvalue()).decode()
        if len(encoded) <= MAX_IMAGE_B64:
            return PreparedImage("image/jpeg", encoded, *rgb.size)
    raise MediaError("the picture stays too large even compressed")


def reads_pdfs(model: str) -> bool:
    """Whether ``model`` takes PDF ``document`` blocks."""
    return not model.startswith(_NO_PDF_PREFIXES)


@dataclass(frozen=True, slots=True)
class PreparedPdf:
    pages: int
    data: str | None  # base64, when sent as a document
    text: str | None  # extracted text, when not
    note: str | None = None

    def block(self, title: str | None) -> ContentBlock:
        if self.data is not None:
            block: ContentBlock = {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": self.data},
            }
            if title:
                block["title"] = title[:200]
            return block
        return {
            "type": "text",
            "text": f"[text of {title or 'the PDF'}, {self.pages} pages]\n{self.text or ''}",
        }


def prepare_pdf(data: bytes, *, as_document: bool, max_pages: int, max_chars: int) -> PreparedPdf:
    """A PDF as a document block (when the model reads PDFs and it is within the API's limits),
    else its text (the first ``max_pages`` pages, at most ``max_chars``). Raises only
    :class:`MediaError`."""
    try:
        return _prepare_pdf(data, as_document=as_document, max_pages=max_pages, max_chars=max_chars)
    except MediaError:
        raise
    except Exception as exc:  # pypdf on untrusted bytes raises anything (TypeError, RecursionError...)
        raise MediaError(UNREADABLE_PDF) from exc


def _prepare_pdf(data: bytes, *, as_document: bool, max_pages: int, max_chars: int) -> PreparedPdf:
    # Imported on the first PDF (on the decoding thread): pypdf and the cryptography it loads cost
    # every hygieia start about 0.3 s of CPU, and most never see a PDF.
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        raise MediaError("the PDF is password-protected")
    pages = len(reader.pages)
    if as_document and pages <= max_pages and len(data) <= MAX_PDF_BYTES:
        return PreparedPdf(pages, base64.b64encode(data).decode(), None)
    chunks: list[str] = []
    size = 0
    for page in reader.pages[:max_pages]:
        try:
            text = page.extract_text() or ""
        except Exception:  # one damaged page: the others may still be read
            text = ""
        chunks.append(text)
        size += len(text)
        if size >= max_chars:
            break
    text = "\n\n".join(chunks)[:max_chars]
    note = None
    if pages > max_pages or size >= max_chars:
        note = f"only the text of the first part of this {pages}-page PDF was read"
    if not text.strip():
        raise MediaError("the PDF has no text I can read (a scan?)")
    return PreparedPdf(pages, None, text, note)
