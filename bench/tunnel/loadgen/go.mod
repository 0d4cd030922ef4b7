module tunnelmux.local/bench/loadgen

go 1.23
