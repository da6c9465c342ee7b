"""Error replies as providers and gateways send them, read and classified (pure functions):
the bodies below are OpenAI's and those a LiteLLM 1.79.3 proxy sent in front of the test
server (tests/test_litellm_gateway.py runs the real one)."""

import pytest

from grading.pipeline.provider_errors import Action, read_error
from grading.pipeline.replies import EmptyAnswer, ErrorReply, NotACompletion, parse_reply

LITELLM_TAIL = ". Received Model Group=grader\nAvailable Model Group Fallbacks=None"


def error(message, *, type=None, code=None, param=None) -> dict:  # `type`: the field's name
    return {"message": message, "type": type, "code": code, "param": param}


@pytest.mark.parametrize(
    ("status", "body", "action", "words"),
    [
        (429, error("You exceeded your current quota, please check your plan and billing details.",
                    type="insufficient_quota", code="insufficient_quota"), Action.FATAL, "exceeded your current quota"),
        (400, error("Billing hard limit has been reached", type="invalid_request_error",
                    code="billing_hard_limit_reached"), Action.FATAL, "Billing hard limit"),
        (400, error("Your credit balance is too low to access the Anthropic API.", type="invalid_request_error"),
         Action.FATAL, "credit balance"),
        (429, error("litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current quota, "
                    "please check your plan and billing details." + LITELLM_TAIL, type="throttling_error", code="429"),
         Action.FATAL, "You exceeded your current quota"),
        (429, error("Rate limit reached for requests", type="requests", code="rate_limit_exceeded"),
         Action.RETRY_UNCOUNTED, "Rate limit reached"),
        (400, error("litellm.BadRequestError: OpenAIException - Unsupported parameter: 'max_tokens' is not supported "
                    "with this model. Use 'max_completion_tokens' instead." + LITELLM_TAIL, code="400"),
         Action.FATAL, "Unsupported parameter: 'max_tokens'"),
        (400, error('litellm.BadRequestError: OpenAIException - {"error": {"message": "Unsupported parameter: '
                    "'temperature' is not supported with this model.\", \"type\": \"invalid_request_error\", "
                    '"param": "temperature", "code": "unsupported_parameter"}}' + LITELLM_TAIL, code="400"),
         Action.FATAL, "Unsupported parameter: 'temperature' is not supported with this model."),
        (400, error("litellm.UnsupportedParamsError: openai does not support parameters: ['reasoning_effort'], for "
                    "model=grader." + LITELLM_TAIL, type="None", code="400"), Action.FATAL, "does not support"),
        (400, error("{'error': '/chat/completions: Invalid model name passed in model=nope. Call `/v1/models` to "
                    "view available models for your key.'}", type="None", param="None", code="400"),
         Action.FATAL, "Invalid model name passed in model=nope"),
        (404, error("litellm.NotFoundError: NotFoundError: OpenAIException - The model `m` does not exist or you do "
                    "not have access to it." + LITELLM_TAIL, code="404"), Action.FATAL, "does not exist"),
        (400, error("This model's maximum context length is 8192 tokens.", type="invalid_request_error",
                    param="messages", code="context_length_exceeded"), Action.FAIL, "maximum context length"),
        (400, error("Invalid value for 'response_format'.", type="invalid_request_error", param="response_format"),
         Action.FATAL, "response_format"),
        (500, error("litellm.InternalServerError: InternalServerError: OpenAIException - The server had an error"
                    + LITELLM_TAIL, code="500"), Action.RETRY, "The server had an error"),
        (500, "upstream: Error code: 400 - {'error': {'message': 'bad model', 'code': 'model_not_found'}}",
         Action.FATAL, "bad model"),
        (503, None, Action.RETRY, "HTTP 503 with no message"),
        (307, None, Action.FATAL, "HTTP 307 with no message"),
    ],
)  # fmt: skip
def test_errors_are_read_through_a_gateways_wrapping_and_classified(status, body, action, words):
    problem = read_error(status, body)
    assert problem.action() is action
    assert words in problem.message
    assert "Received Model Group" not in problem.message


def test_two_errors_of_one_kind_with_other_words_are_the_same_failure():
    first = read_error(400, error("Too long (request req_1)", type="invalid_request_error", param="messages"))
    second = read_error(400, error("Too long (request req_2)", type="invalid_request_error", param="messages"))
    assert first.kind == second.kind
    assert first.message != second.message


def test_a_redirect_says_where_to_point_the_base_url():
    problem = read_error(308, None, location="https://api.example.com/v1/chat/completions")
    assert problem.describe("grader") == (
        "HTTP 308 from grader: the endpoint redirected to https://api.example.com/v1/chat/completions; redirects "
        "are not followed, so set the base URL to the final address"
    )


@pytest.mark.parametrize(
    ("raw", "style", "text", "refused", "truncated"),
    [
        (b'{"choices":[{"message":{"content":null,"refusal":"No."},"finish_reason":"stop"}]}', "chat", "No.", True,
         False),
        (b'{"choices":[{"message":{"content":"Half an ans"},"finish_reason":"length"}]}', "chat", "Half an ans",
         False, True),
        (b'{"choices":[{"message":{"content":null},"finish_reason":"content_filter"}]}', "chat", "", True, False),
        (b'{"status":"completed","output":[{"type":"reasoning","summary":[]},{"type":"message","content":['
         b'{"type":"output_text","text":"a"},{"type":"output_text","text":"b"}]}]}', "responses", "ab", False, False),
        (b'{"status":"completed","output":[{"type":"message","content":[{"type":"refusal","refusal":"No."}]}]}',
         "responses", "No.", True, False),
        (b'{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"output":[{"type":"reasoning",'
         b'"summary":[]}]}', "responses", "", False, True),
    ],
)  # fmt: skip
def test_replies_are_read_with_their_marks(raw, style, text, refused, truncated):
    reply = parse_reply(raw, api_style=style, attempts=1)
    assert (reply.content, reply.refused, reply.truncated) == (text, refused, truncated)


def test_cache_writes_are_read_under_either_name():
    openai = b'{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens_details":{"cache_write_tokens":7}}}'
    anthropic = b'{"choices":[{"message":{"content":"x"}}],"usage":{"cache_creation_input_tokens":9}}'
    assert parse_reply(openai, api_style="chat", attempts=1).cache_write_tokens == 7
    assert parse_reply(anthropic, api_style="chat", attempts=1).cache_write_tokens == 9


@pytest.mark.parametrize(
    ("raw", "style", "problem"),
    [
        (b'{"choices":[{"message":{"content":""},"finish_reason":"stop"}]}', "chat", EmptyAnswer),
        (b'{"status":"completed","output":[]}', "responses", EmptyAnswer),
        (b'{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}', "responses",
         NotACompletion),
        (b"[1, 2]", "chat", NotACompletion),
        (b"not json", "chat", NotACompletion),
    ],
)  # fmt: skip
def test_a_reply_without_an_answer_is_no_completion(raw, style, problem):
    with pytest.raises(problem):
        parse_reply(raw, api_style=style, attempts=1)


# --- every provider's dialect --------------------------------------------------------------------
# One sample of each, in the shape its provider documents it; `body` is what the openai client
# hands over (the "error" object when there is one, else the whole JSON body).

GEMINI_STORE = [
    {
        "error": {
            "code": 400,
            "message": 'Invalid JSON payload received. Unknown name "store": Cannot find field.',
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [{}]}],
        }
    }
]
VLLM_EXTRA = {
    "message": "[{'type': 'extra_forbidden', 'loc': ('body', 'store'), 'msg': 'Extra inputs are not permitted', "
    "'input': True}]",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
AZURE_FILTER = {
    "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
    "type": None,
    "param": "prompt",
    "code": "content_filter",
    "status": 400,
    "innererror": {
        "code": "ResponsibleAIPolicyViolation",
        "content_filter_result": {"self_harm": {"filtered": True, "severity": "medium"}},
    },
}


@pytest.mark.parametrize(
    ("status", "body", "action", "words", "param"),
    [
        # Gemini: its list form; a bad key is a 400 there
        (400, GEMINI_STORE, Action.FATAL, 'Unknown name "store"', ""),
        (400, [{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                          "status": "INVALID_ARGUMENT"}}], Action.FATAL, "API key not valid", ""),
        (400, [{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of "
                          "tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}], Action.FAIL, "input token", ""),
        (429, [{"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                          "status": "RESOURCE_EXHAUSTED"}}], Action.RETRY_UNCOUNTED, "Resource has been", ""),
        # Anthropic: the parameter at the head of the message
        (400, {"type": "invalid_request_error", "message": "max_tokens: 100000 > 64000, which is the maximum "
               "allowed number of output tokens for claude-sonnet-4-5"}, Action.FATAL, "max_tokens: 100000",
         "max_tokens"),
        (400, {"type": "invalid_request_error", "message": "top_k: Extra inputs are not permitted"}, Action.FATAL,
         "top_k", ""),
        (400, {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"},
         Action.FAIL, "prompt is too long", ""),
        (529, {"type": "overloaded_error", "message": "Overloaded"}, Action.RETRY, "Overloaded", ""),
        # vLLM: pydantic's problems inside the message, and FastAPI's own detail list
        (400, VLLM_EXTRA, Action.FATAL, "Extra inputs are not permitted (store)", "store"),
        (422, {"detail": [{"type": "extra_forbidden", "loc": ["body", "store"], "msg": "Extra inputs are not "
               "permitted", "input": True}]}, Action.FATAL, "Extra inputs are not permitted (store)", "store"),
        (400, {"message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
               "type": "BadRequestError", "param": None, "code": 400}, Action.FAIL, "maximum context length", ""),
        # Ollama: a bare string, or plain text
        (404, {"message": 'model "llama9" not found, try pulling it first', "type": "api_error", "param": None,
               "code": None}, Action.FATAL, "try pulling it first", ""),
        (404, "404 page not found", Action.FATAL, "404 page not found", ""),
        # Azure: a missing deployment, and its content filter (this conversation's failure only)
        (404, {"code": "DeploymentNotFound", "message": "The API deployment for this resource does not exist."},
         Action.FATAL, "deployment", ""),
        (400, AZURE_FILTER, Action.FAIL, "content management policy", "prompt"),
    ],
)  # fmt: skip
def test_every_providers_error_dialect_is_read_and_classified(status, body, action, words, param):
    problem = read_error(status, body)
    assert problem.action() is action
    assert words in problem.message
    assert problem.param == param


def test_a_content_filter_and_a_long_prompt_belong_to_their_conversation():
    filtered = read_error(400, AZURE_FILTER)
    assert filtered.content_filter
    assert filtered.conversation_bound
    assert "content filter refused it" in filtered.describe("azure")
    long = read_error(400, error("This model's maximum context length is 8192 tokens.", code="context_length_exceeded"))
    assert long.too_long
    assert long.conversation_bound
    assert not read_error(400, GEMINI_STORE).conversation_bound


@pytest.mark.parametrize(
    ("raw", "status", "words"),
    [
        (b'{"error":{"code":400,"message":"temperature is not supported","metadata":{"provider_name":"X"}}}', 400,
         "temperature is not supported"),
        (b'{"error":{"message":"Upstream timed out"}}', 502, "Upstream timed out"),
    ],
)  # fmt: skip
def test_an_error_sent_with_http_200_is_read_as_the_error_it_names(raw, status, words):
    with pytest.raises(ErrorReply) as caught:
        parse_reply(raw, api_style="chat", attempts=1)
    assert caught.value.status == status
    assert words in read_error(caught.value.status, caught.value.body).message
