//! Google's Gemini API, natively: `streamGenerateContent` over HTTP.
