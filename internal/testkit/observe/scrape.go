package observe

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// Scrape GETs a Prometheus text endpoint at url and returns the value of
// the first series whose line matches series (a regexp of the name and
// labels), or -1 when none does, with the whole body.
func Scrape(t testing.TB, url, series string) (float64, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, res.Status, body)
	}
	m := regexp.MustCompile(`(?m)^` + series + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1, string(body)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v, string(body)
}
