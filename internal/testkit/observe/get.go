package observe

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// get fetches url and returns the answer's status code and body (at most
// 64 MiB); an error is a request that got no whole answer.
func get(ctx context.Context, client *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: read the answer: %w", url, err)
	}
	return resp.StatusCode, body, nil
}
