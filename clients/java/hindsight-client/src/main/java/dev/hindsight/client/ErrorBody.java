package dev.hindsight.client;

import java.util.List;

/** The API's error body: {@code {"error": "text: ...", "field": "text", "errors": [...]}}. */
public record ErrorBody(String error, String field, List<FieldError> errors) {}
