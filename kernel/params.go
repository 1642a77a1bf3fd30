package kernel

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/kairo-os/kairo/abi"
	"github.com/vmihailenco/msgpack/v5"
)

// Decode unmarshals the call's params into v, a pointer to a struct.
// Absent params leave v as is. When decoding fails the error names the
// parameter that was wrong and the type it should have had.
func (c *Call) Decode(v any) error {
	if len(c.Params) == 0 {
		return nil
	}
	// Structure first: whichever door the params came through, a forged
	// length must not make the general decoder allocate what it claims.
	if err := abi.CheckMsgpack(c.Params); err != nil {
		return abi.Errorf(abi.CodeInvalidParams, "params are not valid MsgPack: %v", err)
	}
	err := msgpack.Unmarshal(c.Params, v)
	if err == nil {
		return nil
	}
	return abi.Errorf(abi.CodeInvalidParams, "%s", explainParams(c.Params, v, err))
}

// explainParams finds which field of v the params got wrong by decoding each
// one on its own.
func explainParams(raw msgpack.RawMessage, v any, err error) string {
	rt := reflect.TypeOf(v).Elem()
	var fields map[string]msgpack.RawMessage
	if rt.Kind() != reflect.Struct || msgpack.Unmarshal(raw, &fields) != nil {
		return fmt.Sprintf("params must be a MsgPack map with the fields of %s: %v", rt, err)
	}
	for i := 0; i < rt.NumField(); i++ {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if name == "" {
			name = f.Name
		}
		val, ok := fields[name]
		if !ok {
			continue
		}
		if ferr := msgpack.Unmarshal(val, reflect.New(f.Type).Interface()); ferr != nil {
			return fmt.Sprintf("param %q: %v; want %s", name, ferr, f.Type)
		}
	}
	return fmt.Sprintf("params: %v; want %s", err, rt)
}
