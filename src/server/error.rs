//! [`ApiError`]: every failure at the HTTP edge, as OpenAI's error body; and [`ApiJson`], the
//! JSON body extractor whose rejections are `ApiError`s too.
//!
//! ```text
//! {"error": {"message": "...", "type": "invalid_request_error", "param": "temperature", "code": null}}
//! ```
//!
//! Status codes: 400 for anything wrong with the request (malformed JSON, a bad parameter, a
//! schema or grammar that does not compile, a prompt too long for the model), 404 for an
//! unknown model or route, 405 for a wrong method, 413 for a body over the limit, 429 when the
//! queue is full, 503/504 when a request waited or ran past its timeout, 500 only for faults
//! of the server itself (a model failure, a panic caught at the edge).

use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::error::Error;
use crate::grammar::json_schema::{nesting_exceeds, MAX_JSON_DEPTH};

/// An OpenAI-style error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `not_found_error`, `rate_limit_error`,
    /// `timeout_error`, `server_error`.
    pub kind: &'static str,
    /// The request field at fault, if one is.
    pub param: Option<String>,
    /// A machine-readable code (`model_not_found`, `invalid_schema`, ...), if any.
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), kind, param: None, code: None }
    }

    /// 400 `invalid_request_error`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 500 `server_error`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "invalid_request_error", message)
    }

    pub fn param(mut self, param: impl Into<String>) -> ApiError {
        self.param = Some(param.into());
        self
    }

    pub fn code(mut self, code: &'static str) -> ApiError {
        self.code = Some(code);
        self
    }

    /// A library error about the request's `param` (a schema, grammar, regex, sampling knob,
    /// messages the chat template refuses): 400; the server's own failures (I/O, tokenizer,
    /// model, an output that does not read back, a call out of order) are 500s.
    pub fn from_lib(e: Error, param: Option<&str>) -> ApiError {
        let code = match &e {
            Error::Schema { .. } => Some("invalid_schema"),
            Error::Grammar { .. } => Some("invalid_grammar"),
            Error::Regex { .. } => Some("invalid_regex"),
            Error::Limit { .. } => Some("limit_exceeded"),
            Error::Template { .. } => Some("invalid_messages"),
            Error::Param { .. } | Error::TokenNotAllowed { .. } | Error::TextNotAllowed { .. } => None,
            Error::Tokenizer { .. }
            | Error::Io { .. }
            | Error::Model { .. }
            | Error::Output { .. }
            | Error::State { .. } => {
                return ApiError::internal(one_line(&e.to_string()));
            }
        };
        let mut err = ApiError::bad_request(one_line(&e.to_string()));
        err.code = code;
        err.param = param.map(str::to_string);
        err
    }

    /// The body, as it is sent (also inside a stream).
    pub fn body(&self) -> serde_json::Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status.as_u16(), self.kind, self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS || self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        resp
    }
}

pub(crate) fn one_line(s: &str) -> String {
    s.split('\n').map(str::trim_end).collect::<Vec<_>>().join(" ")
}

/// Deepest nesting of arrays and objects a request body may have: a schema document's own
/// limit ([`MAX_JSON_DEPTH`]) plus the request's wrapping (`response_format.json_schema.schema`,
/// tool parameters), so that a schema too deep is refused by the schema compiler, which names it.
pub const MAX_BODY_DEPTH: usize = MAX_JSON_DEPTH + 16;

/// A JSON request body, parsed with serde; every failure is an [`ApiError`]: 413 past the
/// body limit, 400 for anything else (a field of the wrong shape is named by its path, in the
/// message and as `param`; invalid JSON by serde's line and column). Deep but valid bodies
/// parse, up to [`MAX_BODY_DEPTH`].
pub struct ApiJson<T>(pub T);

/// A request body with a part its fields are flattened from (`#[serde(flatten)]`, where serde
/// loses the path of a failing field): read alone, the part names it.
pub trait RequestBody: DeserializeOwned {
    type Flattened: DeserializeOwned;
}

impl<T: RequestBody, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|rej| {
            if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_request_error",
                    "the request body is larger than the server's limit",
                )
                .code("request_too_large")
            } else {
                ApiError::bad_request(format!("cannot read the request body: {}", rej.body_text()))
            }
        })?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::bad_request("the request body is empty; expected a JSON object"));
        }
        if let Some(at) = nesting_exceeds(&bytes, MAX_BODY_DEPTH) {
            return Err(ApiError::bad_request(format!(
                "the request body nests deeper than {MAX_BODY_DEPTH} levels (at byte {at})"
            ))
            .code("invalid_json"));
        }
        // The nesting is bounded above, so serde's own recursion limit (128, below what a deep
        // but valid schema needs) is lifted.
        let mut de = serde_json::Deserializer::from_slice(&bytes);
        de.disable_recursion_limit();
        let read = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let path = e.path().to_string();
            (e.into_inner(), path)
        });
        match read.and_then(|v: T| de.end().map(|()| v).map_err(|e| (e, String::new()))) {
            Ok(v) => Ok(ApiJson(v)),
            Err((e, path)) => Err(match e.classify() {
                serde_json::error::Category::Data => {
                    // Where serde lost the path (a field of the flattened part), the part read
                    // alone names it (its own fields are unknown to it there).
                    let located = |p: &str| !matches!(p, "" | ".");
                    let part = (!located(&path))
                        .then(|| serde_json::from_slice::<Value>(&bytes).ok().filter(Value::is_object))
                        .flatten()
                        .and_then(|v| serde_path_to_error::deserialize::<_, T::Flattened>(v).err())
                        .map(|p| (p.path().to_string(), without_position(p.inner())))
                        .filter(|(p, _)| located(p));
                    // A field of the wrong shape: named as OpenAI does, in `param` and the message.
                    match part.or_else(|| located(&path).then(|| (path, without_position(&e)))) {
                        Some((path, msg)) => {
                            ApiError::bad_request(format!("invalid request at {path}: {msg}")).param(path)
                        }
                        None => ApiError::bad_request(format!("invalid request: {}", without_position(&e))),
                    }
                }
                _ => ApiError::bad_request(format!("the request body is not valid JSON: {e}")).code("invalid_json"),
            }),
        }
    }
}

/// A data error's message without serde's ` at line L column C` (the field's path says where).
fn without_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.rfind(" at line ") {
        Some(i) if s[i..].contains(" column ") => s[..i].to_string(),
        _ => s,
    }
}
