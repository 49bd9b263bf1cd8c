{{- define "type" -}}
{{- $type := . -}}
{{- if markdownShouldRenderType $type -}}

#### {{ $type.Name }}

{{ if $type.IsAlias }}_Underlying type:_ _{{ markdownRenderTypeLink $type.UnderlyingType  }}_{{ end }}

{{ $type.Doc }}

{{ if $type.GVK -}}
{{- template "resource" $type }}
{{- end }}

{{ if or $type.Validation (index $type.Markers "kubebuilder:validation:XValidation") -}}
_Validation:_
{{- range $type.Validation }}
- {{ template "validation" . }}
{{- end }}
{{- range (index $type.Markers "kubebuilder:validation:XValidation") }}
- {{ template "rule" . }}
{{- end }}
{{- end }}

{{ if $type.References -}}
_Appears in:_
{{- range $type.SortedReferences }}
- {{ markdownRenderTypeLink . }}
{{- end }}
{{- end }}

{{ if $type.Members -}}
| Field | Description | Default | Validation |
| --- | --- | --- | --- |
{{ if $type.GVK -}}
| `apiVersion` _string_ | `{{ $type.GVK.Group }}/{{ $type.GVK.Version }}` | | |
| `kind` _string_ | `{{ $type.GVK.Kind }}` | | |
{{ end -}}

{{ range $type.Members -}}
| `{{ .Name  }}` _{{ markdownRenderType .Type }}_ | {{ template "type_members" . }} | {{ markdownRenderDefault .Default }} | {{ template "fieldValidation" . }} |
{{ end -}}

{{ end -}}

{{ if $type.EnumValues -}}
| Value | Description |
| --- | --- |
{{ range $type.EnumValues -}}
| `{{ .Name }}` | {{ markdownRenderFieldDoc .Doc }} |
{{ end -}}
{{ end -}}

{{- end -}}
{{- end -}}

{{- /* resource: how kubectl names a kind (scope, short names, categories) and
the columns `kubectl get` prints, from its kubebuilder:resource and
kubebuilder:printcolumn markers. */ -}}
{{- define "resource" -}}
{{- $type := . -}}
{{- $scope := "Namespaced" -}}
{{- $short := list -}}
{{- $categories := list -}}
{{- range (index $type.Markers "kubebuilder:resource") -}}
{{- if .Scope }}{{ $scope = .Scope }}{{ end -}}
{{- $short = .ShortName -}}
{{- $categories = .Categories -}}
{{- end -}}
| Scope | Short names | Categories |
| --- | --- | --- |
| {{ $scope }} | {{ range $i, $n := $short }}{{ if $i }}, {{ end }}`{{ $n }}`{{ end }} | {{ range $i, $n := $categories }}{{ if $i }}, {{ end }}`{{ $n }}`{{ end }} |
{{- with (index $type.Markers "kubebuilder:printcolumn") }}

`kubectl get` columns (those of priority 1 with `-o wide`):

| Column | Type | JSONPath | Priority |
| --- | --- | --- | --- |
{{- range . }}
| {{ .Name }} | {{ .Type }} | `{{ .JSONPath }}` | {{ .Priority }} |
{{- end }}
{{- end }}
{{- end -}}

{{- /* validation: one entry of crd-ref-docs' validation list ("Name: value");
markers without a value, such as Optional, by their name alone. */ -}}
{{- define "validation" -}}
{{- if hasSuffix ": {}" . -}}
_{{ trimSuffix ": {}" . }}_
{{- else -}}
{{ markdownRenderFieldDoc . }}
{{- end -}}
{{- end -}}

{{- /* rule: a CEL rule (kubebuilder:validation:XValidation): its message, then
the rule. */ -}}
{{- define "rule" -}}
{{ if .Message }}{{ markdownRenderFieldDoc .Message }}: {{ end }}`{{ .Rule | replace "|" "\\|" }}`
{{- end -}}

{{- /* fieldValidation: a field's validation markers and its own CEL rules;
the rules of its type (the struct, or a list's items) are listed with the
type, not repeated at every field of that type. */ -}}
{{- define "fieldValidation" -}}
{{- $typeRules := list -}}
{{- with .Type -}}
{{- $typeRules = concat $typeRules (default list (index .Markers "kubebuilder:validation:XValidation")) -}}
{{- with .UnderlyingType }}{{ $typeRules = concat $typeRules (default list (index .Markers "kubebuilder:validation:XValidation")) }}{{ end -}}
{{- end -}}
{{- range .Validation -}} {{ template "validation" . }} <br />{{ end -}}
{{- range (index .Markers "kubebuilder:validation:XValidation") -}}
{{- if not (has . $typeRules) }} {{ template "rule" . }} <br />{{ end -}}
{{- end -}}
{{- end -}}
