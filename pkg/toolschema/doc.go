// Package toolschema describes tools to models and to the fleet, and turns
// the arguments a model sends into values a tool can trust.
//
// A [Tool] carries a name, a description, the JSON Schema of its
// arguments and two scheduling flags: ReadOnly tools may run concurrently
// with each other (and a call may be retried on another runner), Exclusive
// tools run alone. Definitions are sent to providers sorted by name
// ([SortTools], [SortDefinitions]) so that prompt caches hit.
//
// Arguments are handled in three steps by [Schema.Parse]:
//
//  1. Decoding: a JSON object, or a JSON string that contains one (some
//     models double-encode), or nothing at all for a tool without
//     arguments.
//  2. Casting where the schema makes it unambiguous: "60" becomes 60 for an
//     integer or number, "true"/"false" (also "yes"/"no", "1"/"0") become
//     booleans, a number or boolean becomes its JSON text for a string, a
//     JSON text becomes an array or object where one is expected, an
//     integral float (60.0) becomes an integer, and null for an optional
//     argument that does not accept null is dropped. Then defaults from the
//     schema fill in missing properties.
//  3. Validation with a JSON Schema validator (draft 2020-12 by default).
//     Every problem is reported with the argument's path and the rule it
//     broke, in words a model can act on, for example
//     `argument "timeout": must be <= 600` or
//     `missing required argument "path"`.
//
// The returned map holds int64 for integral numbers, float64 for others,
// and string, bool, nil, []any and map[string]any; [Decode] copies it into
// a struct.
package toolschema
