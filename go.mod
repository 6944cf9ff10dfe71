module github.com/pipe-dev/pipe

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/ardanlabs/jinja v1.8.0
	github.com/goccy/go-graphviz v0.2.10
	github.com/reugn/go-streams v0.13.0
	github.com/rogpeppe/go-internal v1.16.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
	golang.org/x/text v0.44.0
)

require (
	github.com/disintegration/imaging v1.6.2 // indirect
	github.com/flopp/go-findfont v0.1.0 // indirect
	github.com/fogleman/gg v1.3.0 // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	github.com/tetratelabs/wazero v1.10.1 // indirect
	golang.org/x/image v0.21.0 // indirect
	golang.org/x/tools v0.52.0 // indirect
)
