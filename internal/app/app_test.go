package app

import "testing"

func TestUnauthenticatedAPIOnlyOnLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true,
		"0.0.0.0:8080": false, ":8080": false, "10.1.2.3:8080": false,
	} {
		if err := checkExposure(addr, false); (err == nil) != ok {
			t.Errorf("%s without a token: err %v", addr, err)
		}
		if err := checkExposure(addr, true); err != nil {
			t.Errorf("%s with a token: %v", addr, err)
		}
	}
}
