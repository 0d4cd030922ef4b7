module tunnelmux.local/interop/peer

go 1.23
