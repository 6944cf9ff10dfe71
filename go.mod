module github.com/pipe-dev/pipe

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/ardanlabs/jinja v1.8.0 // indirect
	github.com/reugn/go-streams v0.13.0 // indirect
	github.com/rogpeppe/go-internal v1.16.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)
