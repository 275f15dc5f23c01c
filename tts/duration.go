package tts

import (
	"math"
	"strings"
	"unicode"
)

// Speaking rates behind PredictNaturalSeconds: typical dubbing pace, measured in the unit
// each script is read in. They only need to be good enough to pick a duration factor that
// the duration lock then corrects.
const (
	hanPerSecondZH    = 4.2 // Mandarin: one syllable per character
	hanPerSecondJA    = 3.0 // Japanese kanji carry one to three morae
	kanaPerSecond     = 7.5 // Japanese morae
	hangulPerSecond   = 5.0 // Korean syllable blocks
	wordsPerSecond    = 2.7 // English, about 160 words a minute
	sentencePauseSecs = 0.30
	clausePauseSecs   = 0.15
	minNaturalSeconds = 0.3
)

// wordRates holds words per second for languages read in words.
var wordRates = map[string]float64{
	"en": wordsPerSecond,
	"es": 3.0,
	"fr": 3.0,
	"it": 3.0,
	"pt": 2.9,
	"de": 2.3,
	"ru": 2.3,
}

// PredictNaturalSeconds estimates how long text takes to say at a natural pace in lang
// ("zh", "en", "ja", ...; empty means GuessLanguage). Chinese, Japanese and Korean are
// counted in characters, other scripts in words, plus a pause per clause and sentence
// break inside the text. Mixed text sums the parts. Empty text is 0.
func PredictNaturalSeconds(text, lang string) float64 {
	if strings.TrimSpace(text) == "" {
		return 0
	}
	if lang == "" {
		lang = GuessLanguage(text)
	}
	lang = baseLanguage(lang)
	hanRate := hanPerSecondZH
	if lang == "ja" {
		hanRate = hanPerSecondJA
	}
	wordRate, ok := wordRates[lang]
	if !ok {
		wordRate = wordsPerSecond
	}

	var secs float64
	inWord := false
	digits := 0
	pending := 0.0 // pause waiting for more speech after it
	endWord := func() {
		if inWord {
			w := 1.0
			if digits > 2 {
				w = float64(digits) / 2 // "1999" is said in several words
			}
			secs += w / wordRate
		}
		inWord, digits = false, 0
	}
	speech := func() {
		secs += pending
		pending = 0
	}
	for _, r := range text {
		switch {
		case unicode.Is(unicode.Han, r):
			endWord()
			speech()
			secs += 1 / hanRate
		case unicode.In(r, unicode.Hiragana, unicode.Katakana):
			endWord()
			speech()
			if r != 'ー' && r != 'ッ' && r != 'っ' {
				secs += 1 / kanaPerSecond
			} else {
				secs += 0.5 / kanaPerSecond
			}
		case unicode.Is(unicode.Hangul, r):
			endWord()
			speech()
			secs += 1 / hangulPerSecond
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' || r == '’':
			if !inWord {
				speech()
			}
			inWord = true
			if unicode.IsDigit(r) {
				digits++
			}
		default:
			endWord()
			switch r {
			case '.', '!', '?', '。', '！', '？', '…':
				pending = max(pending, sentencePauseSecs)
			case ',', ';', ':', '，', '、', '；', '：', '—':
				pending = max(pending, clausePauseSecs)
			}
		}
	}
	endWord()
	return max(secs, minNaturalSeconds)
}

// DurationFactorFor returns the IndexTTS-2.5 duration_factor that should make text last
// targetSeconds: target / natural, clamped to MinDurationFactor..MaxDurationFactor. It
// returns 1 when there is no target or no text.
func DurationFactorFor(text, lang string, targetSeconds float64) float64 {
	natural := PredictNaturalSeconds(text, lang)
	if targetSeconds <= 0 || natural <= 0 || math.IsNaN(targetSeconds) || math.IsInf(targetSeconds, 0) {
		return 1
	}
	return ClampDurationFactor(targetSeconds / natural)
}

// ClampDurationFactor limits f to MinDurationFactor..MaxDurationFactor; NaN becomes 1.
func ClampDurationFactor(f float64) float64 {
	if math.IsNaN(f) {
		return 1
	}
	return min(MaxDurationFactor, max(MinDurationFactor, f))
}

// GuessLanguage guesses the language of text from its script: "ja" for kana, "ko" for
// Hangul, "zh" for Chinese characters, otherwise "en".
func GuessLanguage(text string) string {
	var han, kana, hangul int
	for _, r := range text {
		switch {
		case unicode.In(r, unicode.Hiragana, unicode.Katakana):
			kana++
		case unicode.Is(unicode.Han, r):
			han++
		case unicode.Is(unicode.Hangul, r):
			hangul++
		}
	}
	switch {
	case kana > 0:
		return "ja"
	case hangul > 0 && hangul >= han:
		return "ko"
	case han > 0:
		return "zh"
	}
	return "en"
}

// baseLanguage reduces "en-US", "cmn", "zh_CN", "zhen" to the two-letter code the rates
// use.
func baseLanguage(lang string) string {
	lang = strings.ToLower(lang)
	if i := strings.IndexAny(lang, "-_"); i >= 0 {
		lang = lang[:i]
	}
	switch lang {
	case "cmn", "yue", "zhen", "zho", "chi":
		return "zh"
	case "jpn":
		return "ja"
	case "kor":
		return "ko"
	case "eng":
		return "en"
	}
	return lang
}
