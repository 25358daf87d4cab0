//! OpenAI's Responses API: `POST /v1/responses`, streamed.
