module tunnelmux.local/interop/goyamux

go 1.23

require (
	github.com/libp2p/go-yamux/v5 v5.1.0
	tunnelmux.local/interop/peer v0.0.0
)

require github.com/libp2p/go-buffer-pool v0.0.2 // indirect

replace tunnelmux.local/interop/peer => ../peer
