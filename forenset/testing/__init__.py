"""Test helpers reusable across areas: loopback fakes of provider APIs.

``fake_openai.FakeOpenAI`` (chat, images, files, batches) and ``fake_gemini.FakeGemini``
(generateContent incl. IMAGE modality, inlined batches); both take ``Fault`` scripts.
"""
