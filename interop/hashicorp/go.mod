module tunnelmux.local/interop/hashicorp

go 1.23

require tunnelmux.local/interop/peer v0.0.0

require github.com/hashicorp/yamux v0.1.2

replace tunnelmux.local/interop/peer => ../peer
