-- What a market agent needs to sign in a wrk script (market.lua): Ed25519 through LuaJIT's FFI to
-- the libcrypto wrk itself links, RFC 8785 canonical JSON of Lua values, and a small JSON reader
-- for what the market serves (a deal to sign). Loaded with dofile; returns a table.
--
-- JSON values in Lua: objects are tables, arrays are tables marked by ARRAY (as their metatable),
-- null is signing.null, numbers are Lua numbers. Canonical form (RFC 8785): object members sorted
-- by key (the keys here are ASCII, where UTF-16 order is byte order), no whitespace, strings with
-- only ", \ and control characters escaped, numbers in ECMAScript's shortest form.

local ffi = require("ffi")

ffi.cdef [[
typedef struct evp_pkey_st EVP_PKEY;
typedef struct evp_md_ctx_st EVP_MD_CTX;
EVP_PKEY *EVP_PKEY_new_raw_private_key(int type, void *engine, const unsigned char *key, size_t keylen);
EVP_MD_CTX *EVP_MD_CTX_new(void);
int EVP_MD_CTX_reset(EVP_MD_CTX *ctx);
int EVP_DigestSignInit(EVP_MD_CTX *ctx, void **pctx, const void *md, void *engine, EVP_PKEY *pkey);
int EVP_DigestSign(EVP_MD_CTX *ctx, unsigned char *sig, size_t *siglen, const unsigned char *tbs, size_t tbslen);
]]

local EVP_PKEY_ED25519 = 1087  -- NID_ED25519

-- wrk links libcrypto, so its symbols are in the process already; load it by name otherwise.
local crypto = pcall(function() return ffi.C.EVP_DigestSign end) and ffi.C or ffi.load("libcrypto.so.3")

local signing = { ARRAY = {}, null = setmetatable({}, { __tostring = function() return "null" end }) }
local ARRAY, null = signing.ARRAY, signing.null

local function from_hex(hex)
  return (hex:gsub("..", function(pair) return string.char(tonumber(pair, 16)) end))
end

local function to_hex(bytes)
  return (bytes:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

-- A signer for a raw 32-byte Ed25519 private key given as 64 hex digits: sign(bytes) returns the
-- market's wire form of the signature, "0x" + 128 lowercase hex digits.
function signing.signer(private_hex)
  local key = from_hex(private_hex)
  local pkey = crypto.EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, key, #key)
  assert(pkey ~= nil, "not an Ed25519 private key")
  local ctx = crypto.EVP_MD_CTX_new()
  local sig, siglen = ffi.new("unsigned char[64]"), ffi.new("size_t[1]")
  return function(bytes)
    siglen[0] = 64
    assert(crypto.EVP_MD_CTX_reset(ctx) == 1 and crypto.EVP_DigestSignInit(ctx, nil, nil, nil, pkey) == 1
           and crypto.EVP_DigestSign(ctx, sig, siglen, bytes, #bytes) == 1, "Ed25519 signing failed")
    return "0x" .. to_hex(ffi.string(sig, 64))
  end
end

-- -- canonical JSON (RFC 8785) ------------------------------------------------------------------

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                  ["\r"] = "\\r", ["\t"] = "\\t" }

local function canonical_string(text)
  return '"' .. text:gsub('[%c"\\]', function(c)
    return ESCAPES[c] or (c:byte() < 32 and string.format("\\u%04x", c:byte())) or c
  end) .. '"'
end

local function canonical_number(x)
  assert(x == x and x ~= math.huge and x ~= -math.huge, "no canonical form for NaN or infinity")
  if x == math.floor(x) and math.abs(x) < 2^53 then
    return string.format("%d", x)
  end
  local text
  for precision = 1, 17 do  -- the shortest spelling that reads back as the same double
    text = string.format("%." .. precision .. "g", x)
    if tonumber(text) == x then break end
  end
  local mantissa, exponent = text:match("^(.-)e([-+]%d+)$")
  if not mantissa then return text end
  exponent = tonumber(exponent)
  if exponent >= 21 or exponent <= -7 then  -- ECMAScript keeps the exponent form only out there
    return mantissa .. "e" .. (exponent > 0 and "+" or "-") .. math.abs(exponent)
  end
  local digits = mantissa:gsub("[-.]", "")
  local sign = x < 0 and "-" or ""
  if exponent < 0 then return sign .. "0." .. string.rep("0", -exponent - 1) .. digits end
  return sign .. digits .. string.rep("0", exponent + 1 - #digits)
end

local function canonical(value)
  local kind = type(value)
  if kind == "string" then return canonical_string(value)
  elseif kind == "number" then return canonical_number(value)
  elseif kind == "boolean" then return tostring(value)
  elseif value == null then return "null"
  elseif getmetatable(value) == ARRAY then
    local parts = {}
    for i = 1, #value do parts[i] = canonical(value[i]) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  local keys = {}
  for key in pairs(value) do keys[#keys + 1] = key end
  table.sort(keys)
  local parts = {}
  for i, key in ipairs(keys) do parts[i] = canonical_string(key) .. ":" .. canonical(value[key]) end
  return "{" .. table.concat(parts, ",") .. "}"
end
signing.canonical = canonical

-- A signed message's body: the message with its "signature", the sender's signature of the
-- canonical JSON of the message without it (what the market checks, trust/messages.py).
function signing.signed(sign, message)
  message.signature = nil
  message.signature = sign(canonical(message))
  return canonical(message)
end

-- What both parties of a deal_confirmed sign: its canonical JSON without buyer.signature and
-- seller.signature (trust/messages.py's deal_signing_bytes).
function signing.deal_bytes(deal)
  deal.buyer.signature, deal.seller.signature = nil, nil
  return canonical(deal)
end

-- -- reading JSON ------------------------------------------------------------------------------

local decode_value

local function skip(text, at)
  return text:find("[^ \t\r\n]", at) or #text + 1
end

local function utf8_char(code)
  if code < 0x80 then return string.char(code)
  elseif code < 0x800 then return string.char(0xC0 + math.floor(code / 64), 0x80 + code % 64)
  elseif code < 0x10000 then
    return string.char(0xE0 + math.floor(code / 4096), 0x80 + math.floor(code / 64) % 64, 0x80 + code % 64)
  end
  return string.char(0xF0 + math.floor(code / 262144), 0x80 + math.floor(code / 4096) % 64,
                     0x80 + math.floor(code / 64) % 64, 0x80 + code % 64)
end

local SIMPLE = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }

local function decode_string(text, at)  -- at: the opening quote
  local parts, i = {}, at + 1
  while true do
    local stop = text:find('["\\]', i)
    assert(stop, "unterminated JSON string")
    parts[#parts + 1] = text:sub(i, stop - 1)
    if text:sub(stop, stop) == '"' then return table.concat(parts), stop + 1 end
    local escape = text:sub(stop + 1, stop + 1)
    if escape == "u" then
      local code = tonumber(text:sub(stop + 2, stop + 5), 16)
      i = stop + 6
      if code >= 0xD800 and code < 0xDC00 and text:sub(i, i + 1) == "\\u" then  -- a surrogate pair
        local low = tonumber(text:sub(i + 2, i + 5), 16)
        code, i = 0x10000 + (code - 0xD800) * 1024 + (low - 0xDC00), i + 6
      end
      parts[#parts + 1] = utf8_char(code)
    else
      parts[#parts + 1] = assert(SIMPLE[escape], "bad JSON escape")
      i = stop + 2
    end
  end
end

decode_value = function(text, at)
  at = skip(text, at)
  local c = text:sub(at, at)
  if c == "{" then
    local object = {}
    at = skip(text, at + 1)
    if text:sub(at, at) == "}" then return object, at + 1 end
    while true do
      local key
      key, at = decode_string(text, skip(text, at))
      at = skip(text, at)
      assert(text:sub(at, at) == ":", "expected : in a JSON object")
      object[key], at = decode_value(text, at + 1)
      at = skip(text, at)
      local sep = text:sub(at, at)
      if sep == "}" then return object, at + 1 end
      assert(sep == ",", "expected , or } in a JSON object")
      at = at + 1
    end
  elseif c == "[" then
    local array = setmetatable({}, ARRAY)
    at = skip(text, at + 1)
    if text:sub(at, at) == "]" then return array, at + 1 end
    while true do
      array[#array + 1], at = decode_value(text, at)
      at = skip(text, at)
      local sep = text:sub(at, at)
      if sep == "]" then return array, at + 1 end
      assert(sep == ",", "expected , or ] in a JSON array")
      at = at + 1
    end
  elseif c == '"' then return decode_string(text, at)
  elseif text:sub(at, at + 3) == "true" then return true, at + 4
  elseif text:sub(at, at + 4) == "false" then return false, at + 5
  elseif text:sub(at, at + 3) == "null" then return null, at + 4
  end
  local number = text:match("^-?%d+%.?%d*[eE]?[-+]?%d*", at)
  assert(number and #number > 0, "bad JSON value")
  return tonumber(number), at + #number
end

-- The value of a JSON document; error() on anything that is not one.
function signing.decode(text)
  local value, at = decode_value(text, 1)
  assert(skip(text, at) == #text + 1, "trailing text after the JSON value")
  return value
end

return signing
