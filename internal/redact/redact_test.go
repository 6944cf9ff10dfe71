package redact

import "testing"

func TestUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		`gen.servers=["http://bob:PW@127.0.0.1:30000"]`:          `gen.servers=["http://127.0.0.1:30000"]`,
		`gen.servers=["http://a:x@h1:1","https://c:d@h2:2/v1"]`:  `gen.servers=["http://h1:1","https://h2:2/v1"]`,
		`gen.servers=[{url="http://bob:PW@h:1", concurrency=4}]`: `gen.servers=[{url="http://h:1", concurrency=4}]`,
		`gen.servers=["http://bob:p@ss@h:1"]`:                    `gen.servers=["http://h:1"]`,
		`gen.servers=["http://bob:SECRET PW@host:bad port"]`:     `gen.servers=["http://host:bad port"]`,
		`http://a:b@h1:1,http://c:d@h2:2`:                        `http://h1:1,http://h2:2`,
		`--run-dir=/data/runs/x`:                                 `--run-dir=/data/runs/x`,
		`s3://bucket/prefix`:                                     `s3://bucket/prefix`,
		`gen.servers=["http://host:30000"] mail me at someone@x`: `gen.servers=["http://host:30000"] mail me at someone@x`,
	} {
		if got := Userinfo(in); got != want {
			t.Errorf("Userinfo(%q) = %q, want %q", in, got, want)
		}
	}
	if out, changed := Args([]string{"run", "p.toml", "--set", `gen.servers=["http://u:p@h:1"]`}); !changed || out[3] != `gen.servers=["http://h:1"]` || out[0] != "run" {
		t.Errorf("Args: %q %v", out, changed)
	}
}

func TestSecrets(t *testing.T) {
	in := `servers = ["http://bob:pw@host:30000"]
# token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
key = "sk-proj-abcdefghijklmnopqrstuvwx"
aws = "AKIAABCDEFGHIJKLMNOP"
name = "hf_short"`
	want := `servers = ["http://host:30000"]
# token = "<redacted>"
key = "<redacted>"
aws = "<redacted>"
name = "hf_short"`
	if got := Secrets(in); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
