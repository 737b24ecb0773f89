package fleet

import (
	"bufio"
	"regexp"
	"strconv"
	"strings"
)

// ServerCounts are the API server's own counts from its /metrics text,
// keyed like the Counter's: Requests from apiserver_request_total (requests
// answered, any code) by verb, resource and subresource; BodyBytes from the
// sum of apiserver_request_body_size_bytes (bodies received), which has no
// subresource label, so it is under the key without one.
type ServerCounts map[RequestKey]Count

var metricLine = regexp.MustCompile(`^(apiserver_request_total|apiserver_request_body_size_bytes_sum)\{([^}]*)\} (\S+)$`)
var labelPair = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ParseServerCounts reads the API server's /metrics text.
func ParseServerCounts(text string) ServerCounts {
	out := ServerCounts{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := metricLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[p[1]] = p[2]
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		// apiserver_request_total names verbs like HTTP (PUT, LIST), the
		// body size histogram like the API (update, list).
		verb := strings.ToUpper(labels["verb"])
		switch verb {
		case "LIST":
			verb = "GET"
		case "CREATE":
			verb = "POST"
		case "UPDATE":
			verb = "PUT"
		}
		k := RequestKey{Verb: verb, Resource: labels["resource"], Subresource: labels["subresource"]}
		c := out[k]
		if m[1] == "apiserver_request_total" {
			c.Requests += int64(v)
		} else {
			c.BodyBytes += int64(v)
		}
		out[k] = c
	}
	return out
}
