package studio

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"

	"dubstudio/i18n"
)

// EmotionMode says where a line's emotion comes from (IndexTTS-2's four controls).
type EmotionMode string

const (
	EmotionSpeaker EmotionMode = "speaker" // the speaker reference itself
	EmotionAudio   EmotionMode = "audio"   // a separate emotion reference audio, with a weight
	EmotionVector  EmotionMode = "vector"  // 8 values: happy angry sad afraid disgusted melancholic surprised calm
	EmotionText    EmotionMode = "text"    // a description, read by the Qwen emotion model
)

// EmotionModes lists the modes in the order the interface offers them.
var EmotionModes = []EmotionMode{EmotionSpeaker, EmotionAudio, EmotionVector, EmotionText}

// EmotionNames are the eight dimensions of an emotion vector, in IndexTTS-2's order.
var EmotionNames = [8]string{"happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm"}

// MaxEmotionSum is IndexTTS-2's cap on the sum of an emotion vector.
const MaxEmotionSum = 0.8

// Emotion is a character default or a line override, stored as JSON.
type Emotion struct {
	Mode        EmotionMode `json:"mode"`
	AudioSHA256 string      `json:"audio_sha256,omitempty"`
	Weight      float64     `json:"weight,omitempty"`
	Vector      []float64   `json:"vector,omitempty"`
	Text        string      `json:"text,omitempty"`
	// SourceSegment, when set, uses the project's source audio between these times as
	// the emotion reference (the original actor's delivery).
	SourceStartMs int `json:"source_start_ms,omitempty"`
	SourceEndMs   int `json:"source_end_ms,omitempty"`
}

// Validate checks e and reports the first problem as a message key.
func (e Emotion) Validate() error {
	switch e.Mode {
	case EmotionSpeaker:
		return nil
	case EmotionAudio:
		if e.AudioSHA256 == "" && e.SourceEndMs <= e.SourceStartMs {
			return i18n.Errorf(ErrInvalid, "emotion.audio_missing")
		}
		if e.SourceStartMs < 0 {
			return i18n.Errorf(ErrInvalid, "emotion.bad_source")
		}
		if !inRange(e.Weight, 0, 1) {
			return i18n.Errorf(ErrInvalid, "emotion.bad_weight")
		}
	case EmotionVector:
		if len(e.Vector) != 8 {
			return i18n.Errorf(ErrInvalid, "emotion.bad_vector")
		}
		sum := 0.0
		for _, v := range e.Vector {
			if !inRange(v, 0, 1) {
				return i18n.Errorf(ErrInvalid, "emotion.bad_vector")
			}
			sum += v
		}
		if sum > MaxEmotionSum+1e-9 {
			return i18n.Errorf(ErrInvalid, "emotion.vector_sum", MaxEmotionSum)
		}
	case EmotionText:
		if t := strings.TrimSpace(e.Text); t == "" || len([]rune(t)) > 200 {
			return i18n.Errorf(ErrInvalid, "emotion.bad_text")
		}
	default:
		return i18n.Errorf(ErrInvalid, "emotion.bad_mode")
	}
	return nil
}

// checkEmotion is e.Validate, and a segment of the source audio (FromSource) at most
// a line long (MAX_LINE_SECONDS): each render cuts the segment into a blob of its own,
// so its length is disk that a number in a form would otherwise claim.
func (l Limits) checkEmotion(e Emotion) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if most := l.LineMs(); e.FromSource() && e.SourceEndMs-e.SourceStartMs > most {
		return i18n.Errorf(ErrInvalid, "emotion.source_too_long", seconds(e.SourceEndMs-e.SourceStartMs), seconds(most))
	}
	return nil
}

// Value implements driver.Valuer.
func (e Emotion) Value() (driver.Value, error) {
	b, err := json.Marshal(e)
	return string(b), err
}

// Scan implements sql.Scanner.
func (e *Emotion) Scan(src any) error {
	switch v := src.(type) {
	case []byte:
		return json.Unmarshal(v, e)
	case string:
		return json.Unmarshal([]byte(v), e)
	case nil:
		*e = Emotion{}
		return nil
	}
	return fmt.Errorf("emotion: cannot scan %T", src)
}

// Character is a voice in a project.
type Character struct {
	ID             int64
	ProjectID      int64
	Name           string
	Color          string
	RefAudioSHA256 *string `gorm:"column:ref_audio_sha256"`
	RefAudioName   string
	// RefWarnings are what the checks of the reference voice found (media.CheckVoice).
	RefWarnings  []VoiceWarning `gorm:"serializer:json"`
	Emotion      Emotion
	PreviewVoice string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// PreviewVoices are the espeak-ng voices offered for the CPU preview engine.
var PreviewVoices = []string{"en", "en-us", "en-gb-x-rp", "cmn", "yue", "ja", "ko", "fr", "de", "es", "it", "pt", "ru"}

var colorRe = regexp.MustCompile(`^#[0-9a-f]{6}$`)

// Palette gives new characters distinct colours.
var Palette = []string{"#4f6bed", "#d9534f", "#2e9e6b", "#c77c02", "#8e44ad", "#16a2b8", "#b5496b", "#5d6d7e"}

// CharacterParams are the editable fields of a character.
type CharacterParams struct {
	Name         string
	Color        string
	Emotion      Emotion
	PreviewVoice string
}

// FieldsError maps a form field to a message key, for inline form errors.
type FieldsError map[string]*i18n.Error

func (f FieldsError) Error() string {
	var parts []string
	for k, v := range f {
		parts = append(parts, k+": "+v.Error())
	}
	return "invalid fields: " + strings.Join(parts, "; ")
}

func (f FieldsError) Unwrap() error { return ErrInvalid }

func (p *CharacterParams) validate(limits Limits) error {
	fe := FieldsError{}
	p.Name = strings.TrimSpace(p.Name)
	if p.Name == "" || len([]rune(p.Name)) > 100 {
		fe["name"] = i18n.Errorf(ErrInvalid, "character.bad_name")
	} else if !cleanName(p.Name) {
		fe["name"] = i18n.Errorf(ErrInvalid, "name.bad_chars")
	}
	p.Color = strings.ToLower(strings.TrimSpace(p.Color))
	if !colorRe.MatchString(p.Color) {
		fe["color"] = i18n.Errorf(ErrInvalid, "character.bad_color")
	}
	if err := limits.checkEmotion(p.Emotion); err != nil {
		var ie *i18n.Error
		errors.As(err, &ie)
		fe["emotion"] = ie
	}
	ok := false
	for _, v := range PreviewVoices {
		ok = ok || v == p.PreviewVoice
	}
	if !ok {
		fe["preview_voice"] = i18n.Errorf(ErrInvalid, "character.bad_voice")
	}
	if len(fe) > 0 {
		return fe
	}
	return nil
}

// Characters lists a project's characters by name.
func (s *Store) Characters(ctx context.Context, projectID int64) ([]Character, error) {
	var cs []Character
	err := s.db.WithContext(ctx).Where("project_id = ?", projectID).Order("lower(name)").Find(&cs).Error
	return cs, err
}

// Character returns one character of a project.
func (s *Store) Character(ctx context.Context, projectID, id int64) (*Character, error) {
	var c Character
	err := s.db.WithContext(ctx).Where("project_id = ? AND id = ?", projectID, id).First(&c).Error
	return &c, notFound(err, "character")
}

// CreateCharacter adds a character.
func (s *Store) CreateCharacter(ctx context.Context, projectID int64, p CharacterParams) (*Character, error) {
	if err := p.validate(s.Limits); err != nil {
		return nil, err
	}
	c := &Character{ProjectID: projectID, Name: p.Name, Color: p.Color, Emotion: p.Emotion, PreviewVoice: p.PreviewVoice}
	if err := s.db.WithContext(ctx).Create(c).Error; err != nil {
		if isUniqueViolation(err) {
			return nil, FieldsError{"name": i18n.Errorf(ErrConflict, "character.exists", p.Name)}
		}
		return nil, fmt.Errorf("error creating character: %w", err)
	}
	return c, nil
}

// UpdateCharacter changes a character's editable fields.
func (s *Store) UpdateCharacter(ctx context.Context, projectID, id int64, p CharacterParams) error {
	if err := p.validate(s.Limits); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Model(&Character{}).Where("project_id = ? AND id = ?", projectID, id).
		Updates(map[string]any{"name": p.Name, "color": p.Color, "emotion": p.Emotion, "preview_voice": p.PreviewVoice, "updated_at": time.Now()})
	if res.Error != nil {
		if isUniqueViolation(res.Error) {
			return FieldsError{"name": i18n.Errorf(ErrConflict, "character.exists", p.Name)}
		}
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("character %d: %w", id, ErrNotFound)
	}
	return nil
}

// VoiceWarning is one thing a reference voice's checks found that makes a worse
// clone: a message key of the catalog and its arguments, already formatted.
type VoiceWarning struct {
	Key  string   `json:"key"`
	Args []string `json:"args,omitempty"`
}

// SetCharacterReference points a character at a stored reference audio blob.
// displayName is the uploaded file's name, shown to users and never used as a path.
func (s *Store) SetCharacterReference(ctx context.Context, projectID, id int64, sha256, displayName string) error {
	return s.SetCheckedCharacterReference(ctx, projectID, id, sha256, displayName, nil)
}

// SetCheckedCharacterReference is SetCharacterReference with what the voice's checks
// found, which the character's card shows (none: no warning).
func (s *Store) SetCheckedCharacterReference(ctx context.Context, projectID, id int64, sha256, displayName string, warnings []VoiceWarning) error {
	if warnings == nil {
		warnings = []VoiceWarning{}
	}
	w, err := json.Marshal(warnings)
	if err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Model(&Character{}).Where("project_id = ? AND id = ?", projectID, id).
		Updates(map[string]any{"ref_audio_sha256": sha256, "ref_audio_name": displayName, "ref_warnings": string(w), "updated_at": time.Now()})
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("character %d: %w", id, ErrNotFound)
	}
	return res.Error
}

// DeleteCharacter removes a character; its lines keep their text and lose the speaker.
func (s *Store) DeleteCharacter(ctx context.Context, projectID, id int64) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec("DELETE FROM characters WHERE project_id = ? AND id = ?", projectID, id)
		if res.Error == nil && res.RowsAffected == 0 {
			return fmt.Errorf("character %d: %w", id, ErrNotFound)
		}
		return res.Error
	})
}

// SetCharacterEmotionAudio makes a stored recording the character's emotion reference
// (IndexTTS-2's emotion audio prompt), with a weight from 0 to 1.
func (s *Store) SetCharacterEmotionAudio(ctx context.Context, projectID, id int64, sha256 string, weight float64) error {
	e := Emotion{Mode: EmotionAudio, AudioSHA256: sha256, Weight: weight}
	if err := e.Validate(); err != nil {
		return err
	}
	res := s.db.WithContext(ctx).Model(&Character{}).Where("project_id = ? AND id = ?", projectID, id).
		Updates(map[string]any{"emotion": e, "updated_at": time.Now()})
	if res.Error == nil && res.RowsAffected == 0 {
		return fmt.Errorf("character %d: %w", id, ErrNotFound)
	}
	return res.Error
}
