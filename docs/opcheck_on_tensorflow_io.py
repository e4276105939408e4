"""opcheck on 26 ops of tensorflow-io 0.37.1, through tfio.* (docs/opcheck.md's third library).

    pip install "tensorflow-cpu==2.16.*" "tensorflow-io==0.37.1" pillow   # Python 3.11
    pip install --no-deps -e .                 # tf_stopgrad, built against that TensorFlow
    python docs/opcheck_on_tensorflow_io.py

Every check, with library=None (it finds libtensorflow_io.so). The samples hold every dtype an op
declares, and a scalar and an empty batch where a tensor is encoded; a decoder gets valid bytes
only, and edges derives b"" and the rest. The bytes are made here: WAV by Python's wave (24-bit
for int32), images by Pillow, FLAC and Vorbis by tensorflow-io's own encoders, the rest by hand.
About 7 CPU-minutes, 8 to 14 minutes on 2 busy cores: each crash costs a fresh process.
"""

import io
import json
import struct
import wave

import numpy as np
import tensorflow as tf
import tensorflow_io as tfio
from PIL import Image
from tensorflow_io.python.ops import core_ops

from tf_stopgrad.testing import opcheck

RATE = np.int64(44100)
PCM = {dtype: np.array([[0, 1], [2, 3], [4, 5], [6, 7]], dtype)  # 4 frames of 2 channels
       for dtype in (np.uint8, np.int16, np.int32, np.float32)}
RGB = np.arange(72, dtype=np.uint8).reshape([4, 6, 3])
GRAY16 = np.arange(24, dtype=np.uint16).reshape([4, 6]) * 1000


def named(name, fn):  # fn under a name of its own, without renaming tensorflow-io's function
    def call(*args):
        return fn(*args)
    call.__name__ = name
    return call


def string(contents):  # a scalar string, as opcheck takes one (bytes are no array)
    return np.array(contents, object)


def wav(sample_width, frames):
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(2)
        writer.setsampwidth(sample_width)
        writer.setframerate(8000)
        writer.writeframes(frames)
    return out.getvalue()


def float_wav(x):  # WAVE_FORMAT_IEEE_FLOAT, which Python's wave does not write
    data, fmt = x.tobytes(), struct.pack("<HHIIHH", 3, 2, 8000, 8000 * 8, 8, 32)
    return (b"RIFF" + struct.pack("<I", 20 + len(fmt) + len(data)) + b"WAVEfmt "
            + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data)


def pillow(array, fmt, **options):
    out = io.BytesIO()
    Image.fromarray(array).save(out, fmt, **options)
    return out.getvalue()


def avro(flag, small, large, single, double, text):  # one record of AVRO_SCHEMA's fields
    return (bytes([flag, small * 2, large * 2]) + struct.pack("<fd", single, double)
            + bytes([len(text) * 2]) + text)


WAVS = {tf.uint8: wav(1, PCM[np.uint8].tobytes()), tf.int16: wav(2, PCM[np.int16].tobytes()),
        tf.int32: wav(3, b"".join(v.to_bytes(3, "little") for v in range(8))),  # 24-bit
        tf.float32: float_wav(PCM[np.float32])}
FLACS = {dtype: tfio.audio.encode_flac(tf.constant(PCM[dtype.as_numpy_dtype]), RATE).numpy()
         for dtype in (tf.uint8, tf.int16, tf.int32)}
VORBIS = tfio.audio.encode_vorbis(tf.constant(PCM[np.float32]) / 8, RATE).numpy()
EXIF = Image.Exif()
EXIF[0x0112] = 3  # orientation: rotated 180 degrees
HDR = b"#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 4 +X 6\n" + bytes([128, 64, 32, 129] * 24)
AVRO_TYPES = ("boolean", "int", "long", "float", "double", "string")
# Fields named in their order: encode_avro takes its tensors in the order of the sorted names.
AVRO_SCHEMA = json.dumps({"type": "record", "name": "r", "fields": [
    {"name": f"f{i}", "type": kind} for i, kind in enumerate(AVRO_TYPES)]})
JSON_SPECS = {"a": tf.TensorSpec([], tf.int64), "b": tf.TensorSpec([2], tf.float64),
              "c": tf.TensorSpec([], tf.string), "d": tf.TensorSpec([], tf.bool)}


def decoder(name, decode, contents):  # edges derive the empty string, b""
    return named(name, decode), [(string(contents),)]


def decoders(name, decode, contents):  # decode(contents, dtype) for each {dtype: contents}
    return named(name, lambda *strings: [decode(b, d) for b, d in zip(strings, contents)]), [
        tuple(map(string, contents.values()))]


def audio_encoder(name, encode, dtypes):
    return named(name, encode), [
        *[(PCM[dtype], RATE) for dtype in dtypes],
        (np.array(1, dtypes[0]), RATE), (np.zeros([0, 2], dtypes[0]), RATE)]


def batch(*arrays):  # the arrays, then the first element of each (scalars), then none of each
    return [arrays, tuple(a[:1].reshape(()) for a in arrays), tuple(a[:0] for a in arrays)]


SAMPLES = dict([
    decoders("decode_wav", lambda b, d: tfio.audio.decode_wav(b, dtype=d), WAVS),
    audio_encoder("encode_wav", tfio.audio.encode_wav, (np.uint8, np.int16, np.int32, np.float32)),
    decoders("decode_flac", lambda b, d: tfio.audio.decode_flac(b, dtype=d), FLACS),
    audio_encoder("encode_flac", tfio.audio.encode_flac, (np.uint8, np.int16, np.int32)),
    decoder("decode_vorbis", tfio.audio.decode_vorbis, VORBIS),
    audio_encoder("encode_vorbis", tfio.audio.encode_vorbis, (np.float32,)),
    (named("resample", lambda x: tfio.audio.resample(x, 8000, 16000)),  # its Python takes no scalar
     [(PCM[np.float32] / 8,), (PCM[np.int16],), (np.zeros([0, 2], np.float32),)]),
    (named("IO>AudioResample", lambda x: core_ops.io_audio_resample(x, rate_in=8000,
                                                                    rate_out=16000)),
     [(PCM[np.float32] / 8,), (PCM[np.int16],), (np.float32(0.5),),
      (np.zeros([0, 2], np.float32),)]),
    (named("split", lambda x: tfio.audio.split(x, axis=0, epsilon=0.1)),
     [(np.float32([0, 1, 1, 0]),), (np.float32(1),), (np.zeros([0], np.float32),)]),
    (tfio.image.encode_bmp, [(RGB,), (np.uint8(1),), (RGB[:0],)]),
    (tfio.image.encode_gif, [(np.stack([RGB, RGB]),), (np.uint8(1),), (np.stack([RGB, RGB])[:0],)]),
    decoder("decode_webp", tfio.image.decode_webp, pillow(RGB, "WEBP", lossless=True)),
    decoder("decode_tiff", tfio.experimental.image.decode_tiff, pillow(RGB, "TIFF")),
    decoders("decode_pnm", tfio.experimental.image.decode_pnm,
             {tf.uint8: pillow(RGB, "PPM"), tf.uint16: pillow(GRAY16, "PPM")}),
    decoder("decode_hdr", tfio.experimental.image.decode_hdr, HDR),
    # 4 x 6 pixels: YUY2 has 2 bytes a pixel, NV12 1.5
    (tfio.experimental.image.decode_yuy2, [(string(bytes(range(48))), np.int32([4, 6]))]),
    (tfio.experimental.image.decode_nv12, [(string(bytes(range(36))), np.int32([4, 6]))]),
    decoder("decode_jpeg_exif", tfio.experimental.image.decode_jpeg_exif,
            pillow(RGB, "JPEG", exif=EXIF.tobytes())),
    decoder("decode_avif", tfio.experimental.image.decode_avif, pillow(RGB, "AVIF")),
    decoders("decode_jp2", tfio.experimental.image.decode_jp2,
             {tf.uint8: pillow(RGB, "JPEG2000"), tf.uint16: pillow(GRAY16, "JPEG2000")}),
    decoder("decode_obj", tfio.experimental.image.decode_obj, b"v 1 2 3\nv 4 5 6\nv 7 8 9\n"),
    (tfio.experimental.image.draw_bounding_boxes, [
        (np.zeros([1, 6, 6, 3], np.float32), np.float32([[[0.1, 0.1, 0.8, 0.8]]])),
        (np.zeros([1, 6, 6, 3], np.float16), np.float32([[[0.1, 0.1, 0.8, 0.8]]])),
        (np.zeros([0, 6, 6, 3], np.float32), np.zeros([0, 1, 4], np.float32))]),
    decoder("decode_json", lambda s: tfio.experimental.serialization.decode_json(s, JSON_SPECS),
            b'{"a": 1, "b": [1.5, 2.5], "c": "x", "d": true}'),
    (named("encode_avro", lambda *fields: tfio.experimental.serialization.encode_avro(
        list(fields), AVRO_SCHEMA)),
     batch(np.array([True, False]), np.int32([1, 2]), np.int64([1, 2]), np.float32([1, 2]),
           np.float64([1, 2]), np.array([b"a", b"b"], object))),
    (named("decode_avro", lambda s: tfio.experimental.serialization.decode_avro(s, AVRO_SCHEMA)),
     batch(np.array([avro(1, 1, 2, 1.5, 2.5, b"ab"), avro(0, 3, 4, 0.5, 0.25, b"")], object))),
    (named("re2_full_match", lambda s: tfio.experimental.text.re2_full_match(s, "([a-z]+)([0-9])")),
     batch(np.array([b"ab1", b"xy"], object))),
    (named("decode_libsvm", lambda s: [  # every declared dtype, as features' and as labels'
        tfio.experimental.text.decode_libsvm(s, 4, dtype=d, label_dtype=d)
        for d in (tf.float32, tf.float64, tf.int32, tf.int64)]),
     batch(np.array([b"1 1:2 3:4", b"0 2:5"], object))),
])

for fn, samples in SAMPLES.items():
    print(f"{fn.__name__}:\n{opcheck(fn, samples)}\n", flush=True)
