"""Errors in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``) and status codes,
so that every OpenAI client reads what went wrong."""

from __future__ import annotations

from typing import TypedDict

from starlette.responses import JSONResponse

MAX_BODY_BYTES = 1_048_576
"""Largest request body read (1 MiB): a chat message, not a file upload."""


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(TypedDict):
    error: ErrorDetail


class ApiError(Exception):
    """An answer other than 2xx, raised anywhere in the API and rendered once by the app."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> ErrorBody:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def invalid_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def invalid_api_key() -> ApiError:
    return ApiError(
        401,
        "Incorrect API key provided. Send 'Authorization: Bearer <key>' with a key of HYGIEIA_API_KEYS.",
        code="invalid_api_key",
        headers={"WWW-Authenticate": "Bearer"},
    )


def throttled(wait: float) -> ApiError:
    return ApiError(
        429,
        f"Too many requests with a wrong API key from your address: try again in {wait:.0f} s.",
        type="requests",
        code="rate_limit_exceeded",
        headers={"Retry-After": str(int(wait + 0.999))},
    )


def model_not_found(model: str) -> ApiError:
    shown = model if len(model) <= 100 else model[:100] + "…"
    return ApiError(
        404,
        f"The model '{shown}' does not exist. GET /v1/models lists the models served here.",
        code="model_not_found",
        param="model",
    )


def too_large(size: int | None) -> ApiError:
    said = f" ({size:,} bytes)" if size is not None else ""
    return ApiError(
        413,
        f"The request body is too large{said}: at most {MAX_BODY_BYTES:,} bytes are accepted.",
        code="request_too_large",
    )


def context_length_exceeded(detail: str) -> ApiError:
    return ApiError(400, detail, code="context_length_exceeded", param="messages")


def overloaded() -> ApiError:
    return ApiError(
        503,
        "The model is overloaded. Your message is kept in the conversation and will be answered there; "
        "do not send it again.",
        type="server_error",
        code="overloaded",
        headers={"Retry-After": "30"},
    )


def unavailable(message: str, code: str = "model_unavailable") -> ApiError:
    return ApiError(503, message, type="server_error", code=code)


def timed_out(seconds: float) -> ApiError:
    return ApiError(
        504,
        f"No answer within {seconds:.0f} s; the answer will be in the conversation when it comes.",
        type="server_error",
        code="timeout",
    )
